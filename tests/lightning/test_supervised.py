"""SupervisedDDPStrategy is built on the objects ddpkit's connector resolves (no process starts
here; the runs are in test_missions.py and test_lightning_faults.py)."""

from __future__ import annotations

import datetime
import warnings
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

from pytorch_lightning.strategies import DDPStrategy, SingleDeviceStrategy  # noqa: E402

import ddpkit._runtime.launch  # noqa: E402
from ddpkit import DDPKitDeprecationWarning, DDPKitWarning, MisconfigurationError  # noqa: E402
from ddpkit.lightning import DDPPlugin, SupervisedDDPStrategy, Trainer  # noqa: E402
from ddpkit.lightning._launchers import SupervisedSpawnLauncher, SupervisedSubprocessLauncher  # noqa: E402
from ddpkit.lightning._translate import translate_call  # noqa: E402
from ddpkit.testing import make_probe  # noqa: E402


def test_a_1x_call_with_supervise_runs_on_ddpkits_spawn_launcher() -> None:
    with pytest.warns(DDPKitDeprecationWarning) as record:
        trainer = Trainer(accelerator="ddp_cpu", num_processes=2, supervise=True, logger=False)
    assert sum("1.x device flags" in str(w.message) for w in record) == 1
    strategy = trainer.strategy
    assert type(strategy) is SupervisedDDPStrategy
    assert isinstance(strategy.launcher, SupervisedSpawnLauncher)
    assert isinstance(strategy.launcher.ddpkit, ddpkit._runtime.launch.SpawnLauncher)
    # The very objects the connector built: its plugin connects the ranks.
    assert strategy.launcher.ddpkit.plugin is strategy.ddpkit_plugin
    assert trainer.lightning_call == (
        "Trainer(accelerator='cpu', devices=2, strategy='ddp_spawn_find_unused_parameters_true')"
    )


def test_a_modern_call_with_supervise_is_resolved_by_the_connector_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DDPKitWarning)
        trainer = Trainer(accelerator="cpu", devices=2, supervise=True, logger=False)
    assert trainer.plan is not None and trainer.plan.launcher.value == "subprocess"
    assert type(trainer.strategy) is SupervisedDDPStrategy
    assert isinstance(trainer.strategy.launcher, SupervisedSubprocessLauncher)
    assert isinstance(trainer.strategy.launcher.ddpkit, ddpkit._runtime.launch.SubprocessLauncher)


def test_the_strategy_in_lightnings_own_trainer_resolves_through_the_connector() -> None:
    strategy = SupervisedDDPStrategy(start_method="popen", timeout=5, find_unused_parameters=True)
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy=strategy, logger=False)
    assert trainer.strategy is strategy
    assert isinstance(strategy.launcher, SupervisedSubprocessLauncher)
    plugin = strategy.ddpkit_plugin
    assert type(plugin) is DDPPlugin and plugin.find_unused_parameters is True
    assert plugin.stall_timeout == datetime.timedelta(seconds=5)
    assert plugin.world_size == 2
    assert strategy._ddp_kwargs == {"find_unused_parameters": True}


def test_one_process_needs_no_supervision() -> None:
    trainer = Trainer(accelerator="cpu", devices=1, supervise=True, logger=False)
    assert type(trainer.strategy) is SingleDeviceStrategy


def test_under_torchrun_nothing_is_launched_but_the_ranks_are_connected_by_ddpkit() -> None:
    env = {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "2",
        "GROUP_RANK": "0",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
    }
    translation = translate_call(
        {"accelerator": "cpu", "devices": 2, "supervise": True}, make_probe(env=env)
    )
    strategy = translation.kwargs["strategy"]
    assert type(strategy) is SupervisedDDPStrategy
    assert strategy._ddpkit_launcher is None  # torchrun started every rank
    assert translation.plan is not None and translation.plan.launcher.value == "external"


def test_supervise_takes_a_bool() -> None:
    with pytest.raises(
        MisconfigurationError,
        match=r"Trainer\(supervise='yes'\): pass True, False, or leave it out",
    ):
        Trainer(supervise="yes")


@pytest.mark.parametrize(
    "flags",
    [
        {"accelerator": "ddp_cpu", "num_processes": 2},
        {"num_processes": 2, "plugins": ["ddp_find_unused_parameters_false"]},
        {"num_processes": 2, "plugins": [DDPPlugin(static_graph=True)]},
    ],
)
def test_a_plan_ddpkit_resolved_is_supervised_by_default(flags: dict[str, Any]) -> None:
    with pytest.warns(DDPKitDeprecationWarning):
        ours = Trainer(logger=False, **flags)
        plain = Trainer(logger=False, supervise=False, **flags)
    assert type(ours.strategy) is SupervisedDDPStrategy
    assert type(plain.strategy) is DDPStrategy
    # The same DDP underneath: Lightning's strategy with the plugin's options.
    for attr in ("_start_method", "_ddp_kwargs", "_process_group_backend"):
        assert getattr(ours.strategy, attr) == getattr(plain.strategy, attr), attr
    assert ours.lightning_call == plain.lightning_call


def test_a_call_in_lightnings_own_spelling_is_left_to_lightning() -> None:
    trainer = Trainer(accelerator="cpu", devices=2, strategy="ddp", logger=False)
    assert type(trainer.strategy) is DDPStrategy and trainer.plan is None


def test_a_start_method_ddpkit_does_not_have_is_refused() -> None:
    with pytest.raises(
        MisconfigurationError,
        match=r"SupervisedDDPStrategy\(start_method='thread'\): ddpkit starts ranks with "
        r"'popen', 'spawn', 'fork', 'forkserver'",
    ):
        SupervisedDDPStrategy(start_method="thread")
