"""1.x device flags → ddpkit's plan → Lightning 2.x's own objects (no processes start here)."""

from __future__ import annotations

import datetime
import warnings
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

from lightning_fabric.plugins.environments import (  # noqa: E402
    LightningEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)
from pytorch_lightning.strategies import DDPStrategy, SingleDeviceStrategy  # noqa: E402

from ddpkit import DDPKitDeprecationWarning, DDPKitWarning, MisconfigurationError  # noqa: E402
from ddpkit.connector import AcceleratorConnector, Flags  # noqa: E402
from ddpkit.lightning import DDPPlugin, DDPSpawnPlugin, Trainer  # noqa: E402
from ddpkit.lightning._environments import ToLightning  # noqa: E402
from ddpkit.lightning._translate import translate_call  # noqa: E402
from ddpkit.plugins import LocalEnvironment  # noqa: E402
from ddpkit.testing import make_probe  # noqa: E402

TORCHRUN = {
    "RANK": "0",
    "LOCAL_RANK": "0",
    "WORLD_SIZE": "2",
    "GROUP_RANK": "0",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "none",
}


def legacy_trainer(**kwargs: Any) -> tuple[Trainer, list[str]]:
    """Build the Trainer on Lightning's own DDP (``supervise=False``: the objects here are what
    plain Lightning builds; by default ddpkit supervises, test_supervised.py); return it with the
    messages of the DDPKitDeprecationWarnings."""
    kwargs.setdefault("supervise", False)
    with pytest.warns(DDPKitDeprecationWarning) as record:
        trainer = Trainer(logger=False, enable_progress_bar=False, **kwargs)
    return trainer, [str(w.message) for w in record if w.category is DDPKitDeprecationWarning]


def built_plugin(**flags: Any) -> Any:
    """What ddpkit's own connector builds for the same flags (the mapping must follow it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DDPKitWarning)
        return AcceleratorConnector(Flags.of(**flags)).built.training_type


# Each mission call (and a few more 1.x spellings) on this CPU machine: (flags, start method,
# the Lightning registry name the warning names, without find_unused_parameters).
CALLS: dict[str, tuple[dict[str, Any], str, str]] = {
    "ddp_cpu": ({"accelerator": "ddp_cpu", "num_processes": 2}, "spawn", "ddp_spawn"),
    "ddp_cpu+DDPSpawnPlugin": (
        {
            "accelerator": "ddp_cpu",
            "num_processes": 2,
            "plugins": [DDPSpawnPlugin(find_unused_parameters=True)],
        },
        "spawn",
        "ddp_spawn",
    ),
    "ddp_cpu+DDPPlugin": (
        {
            "accelerator": "ddp_cpu",
            "num_processes": 2,
            "plugins": [DDPPlugin(find_unused_parameters=True)],
        },
        "popen",
        "ddp",
    ),
    "num_processes+DDPPlugin": ({"num_processes": 2, "plugins": [DDPPlugin()]}, "popen", "ddp"),
    "num_processes": ({"num_processes": 2}, "spawn", "ddp_spawn"),
    "accelerator=ddp": ({"accelerator": "ddp", "num_processes": 2}, "popen", "ddp"),
    "accelerator=ddp_spawn": (
        {"accelerator": "ddp_spawn", "num_processes": 2},
        "spawn",
        "ddp_spawn",
    ),
    "ddp_cpu_spawn": ({"accelerator": "ddp_cpu_spawn", "num_processes": 2}, "spawn", "ddp_spawn"),
    "strategy=DDPPlugin()": (
        {"accelerator": "cpu", "devices": 2, "strategy": DDPPlugin()},
        "popen",
        "ddp",
    ),
    "registry string": (
        {"num_processes": 2, "plugins": ["ddp_find_unused_parameters_true"]},
        "popen",
        "ddp",
    ),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_legacy_call_becomes_lightnings_ddp_strategy(name: str) -> None:
    flags, start_method, registry = CALLS[name]
    trainer, messages = legacy_trainer(**flags)
    assert isinstance(trainer, pl.Trainer)
    strategy = trainer.strategy
    assert type(strategy) is DDPStrategy
    assert strategy._start_method == start_method
    assert trainer.num_devices == 2 and trainer.num_nodes == 1
    assert type(trainer.accelerator).__name__ == "CPUAccelerator"
    assert type(strategy.cluster_environment) is LightningEnvironment
    # The DDP options are the plugin's, as ddpkit's connector builds it.
    find_unused = built_plugin(**flags).find_unused_parameters
    assert strategy._ddp_kwargs == ({"find_unused_parameters": True} if find_unused else {})
    # ... and the one warning names the Lightning 2.x call that means the same.
    expected = registry + ("_find_unused_parameters_true" if find_unused else "")
    call = f"Trainer(accelerator='cpu', devices=2, strategy={expected!r})"
    assert trainer.lightning_call == call
    device = [m for m in messages if "1.x device flags" in m]
    assert len(device) == 1 and call in device[0] and device[0].startswith(trainer.plan.call)


@pytest.mark.parametrize(
    "flags",
    [
        *(CALLS[name][0] for name in sorted(CALLS)),
        {"num_processes": 2, "plugins": [DDPSpawnPlugin(static_graph=True, timeout=5)]},
        {"num_processes": 2, "plugins": [DDPPlugin(gradient_as_bucket_view=True, bucket_cap_mb=5)]},
        {"num_processes": 2, "plugins": [DDPPlugin(process_group_backend="gloo")]},
        {"num_processes": 2, "precision": "bf16", "sync_batchnorm": True},
        {"num_processes": 2, "plugins": [DDPSpawnPlugin(start_method="forkserver")]},
        {"num_processes": 1},
        {"accelerator": "ddp_cpu", "num_processes": 3, "num_nodes": 1},
    ],
    ids=lambda flags: Flags.of(**flags).call(),
)
def test_the_warned_lightning_call_builds_the_same_objects(flags: dict[str, Any]) -> None:
    """The call the warning names, evaluated with pytorch_lightning.Trainer, gives the same
    strategy, devices, environment and precision as ddpkit.lightning.Trainer."""
    ours, _ = legacy_trainer(**flags)
    assert ours.lightning_call is not None
    names = {"Trainer": pl.Trainer, "DDPStrategy": DDPStrategy, "timedelta": datetime.timedelta}
    theirs = eval(ours.lightning_call, names)
    assert type(theirs.strategy) is type(ours.strategy)
    assert theirs.num_devices == ours.num_devices
    assert theirs.strategy.root_device == ours.strategy.root_device
    assert type(theirs.precision_plugin) is type(ours.precision_plugin)
    assert theirs.precision_plugin.precision == ours.precision_plugin.precision
    environment = getattr(ours.strategy, "cluster_environment", None)
    assert type(getattr(theirs.strategy, "cluster_environment", None)) is type(environment)
    assert type(getattr(theirs.strategy, "_layer_sync", None)) is type(
        getattr(ours.strategy, "_layer_sync", None)
    )
    if isinstance(ours.strategy, DDPStrategy):
        for attr in ("_start_method", "_ddp_kwargs", "_timeout", "_process_group_backend"):
            assert getattr(theirs.strategy, attr) == getattr(ours.strategy, attr), attr


def test_ddp_options_of_the_plugin_reach_lightning() -> None:
    plugin = DDPSpawnPlugin(
        static_graph=True, timeout=7.5, process_group_backend="gloo", broadcast_buffers=False
    )
    trainer, _ = legacy_trainer(num_processes=2, plugins=[plugin])
    strategy = trainer.strategy
    assert strategy._start_method == "spawn"
    assert strategy._timeout == datetime.timedelta(seconds=7.5)
    assert strategy._process_group_backend == "gloo"
    # find_unused_parameters: 1.x's DDPSpawnPlugin default, True.
    assert strategy._ddp_kwargs == {
        "find_unused_parameters": True,
        "static_graph": True,
        "broadcast_buffers": False,
    }
    assert trainer.lightning_call == (
        "Trainer(accelerator='cpu', devices=2, strategy=DDPStrategy(start_method='spawn', "
        "find_unused_parameters=True, static_graph=True, broadcast_buffers=False, "
        "process_group_backend='gloo', timeout=timedelta(seconds=7.5)))"
    )


def test_one_process_is_lightnings_single_device_strategy() -> None:
    trainer, _ = legacy_trainer(num_processes=1)
    assert type(trainer.strategy) is SingleDeviceStrategy
    assert str(trainer.strategy.root_device) == "cpu"
    assert trainer.lightning_call == "Trainer(accelerator='cpu', devices=1)"


def test_the_plan_is_the_connectors_and_explains_like_the_cli(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ddpkit.cli import main

    trainer, _ = legacy_trainer(accelerator="ddp_cpu", num_processes=2)
    assert trainer.plan is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DDPKitWarning)  # ddpkit's own wording of the same
        connector = AcceleratorConnector(Flags.of(accelerator="ddp_cpu", num_processes=2))
        main(["explain", "--accelerator", "ddp_cpu", "--num-processes", "2"])
    assert trainer.plan == connector.plan
    cli = capsys.readouterr().out.rstrip("\n")
    assert trainer.explain() == f"{cli}\n  lightning call   {trainer.lightning_call}"


def test_gpu_calls_map_to_cuda_devices() -> None:
    probe = make_probe(gpus=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DDPKitWarning)
        two = translate_call({"gpus": 2}, probe)
        second = translate_call({"gpus": [1]}, probe)
        ddp = translate_call({"accelerator": "ddp", "gpus": "0,1"}, probe)
    # 1.x's DDP plugins found unused parameters by default; the legacy spellings keep that.
    assert two.devices is not None and two.devices.call == (
        "Trainer(accelerator='gpu', devices=2, strategy='ddp_spawn_find_unused_parameters_true')"
    )
    assert two.kwargs["accelerator"] == "gpu" and two.kwargs["devices"] == 2
    assert (
        second.devices is not None
        and second.devices.call == "Trainer(accelerator='gpu', devices=[1])"
    )
    assert isinstance(second.kwargs["strategy"], SingleDeviceStrategy)
    assert str(second.kwargs["strategy"].root_device) == "cuda:1"
    assert ddp.devices is not None and ddp.devices.strategy._start_method == "popen"
    assert "gpus" not in two.kwargs and "num_processes" not in two.kwargs


def test_under_torchrun_lightning_gets_its_torchelastic_environment() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DDPKitWarning)
        result = translate_call(
            {"accelerator": "ddp_cpu", "num_processes": 2}, make_probe(env=TORCHRUN)
        )
    assert result.plan is not None and result.plan.launcher.value == "external"
    assert result.devices is not None
    assert result.devices.strategy._start_method == "popen"
    assert type(result.kwargs["plugins"][0]) is TorchElasticEnvironment
    assert result.devices.call == (
        "Trainer(accelerator='cpu', devices=2, strategy='ddp_find_unused_parameters_true', "
        "plugins=[TorchElasticEnvironment()])"
    )


def test_under_srun_lightning_gets_its_slurm_environment() -> None:
    env = {
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NAME": "train",
        "SLURM_NTASKS": "2",
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0",
        "SLURM_NODELIST": "n1",
        "SLURM_TASKS_PER_NODE": "2",
        "SLURM_STEP_TASKS_PER_NODE": "2",
        "SLURM_JOB_NUM_NODES": "1",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = translate_call({"num_processes": 2, "plugins": [DDPPlugin()]}, make_probe(env=env))
    assert result.plan is not None and result.plan.environment.value == "slurm"
    assert type(result.kwargs["plugins"][0]) is SLURMEnvironment
    assert result.devices is not None and "plugins=[SLURMEnvironment()]" in result.devices.call


class TeamEnvironment(LocalEnvironment):
    """A user's own ddpkit environment (a subclass: its answers are its own)."""

    def main_address(self) -> str:
        return "10.0.0.7"


def test_a_users_own_environments_are_used_as_given() -> None:
    lightning_env = LightningEnvironment()
    trainer, _ = legacy_trainer(num_processes=2, plugins=[DDPPlugin(), lightning_env])
    assert trainer.strategy.cluster_environment is lightning_env
    assert trainer.plan is not None and trainer.plan.environment.reason.startswith("plugins=[")

    trainer, _ = legacy_trainer(num_processes=2, plugins=[DDPPlugin(), TeamEnvironment()])
    env = trainer.strategy.cluster_environment
    assert isinstance(env, ToLightning) and env.main_address == "10.0.0.7"
    assert "plugins=[TeamEnvironment()]" in (trainer.lightning_call or "")


def test_a_modern_call_goes_to_lightning_unchanged() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DDPKitWarning)  # not a single ddpkit warning
        ours = Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", logger=False)
        theirs = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", logger=False)
    assert ours.plan is None and ours.lightning_call is None
    assert type(ours.strategy) is type(theirs.strategy)
    assert ours.strategy._start_method == theirs.strategy._start_method == "spawn"
    strategy = DDPStrategy(find_unused_parameters=True)
    assert (
        Trainer(accelerator="cpu", devices=2, strategy=strategy, logger=False).strategy is strategy
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"gpus": 2, "strategy": DDPStrategy()},
            r"Trainer\(gpus=2, strategy=DDPStrategy\(\.\.\.\)\): strategy=DDPStrategy\(\.\.\.\) "
            r"is Lightning 2\.x's own.*Fix: spell the devices the Lightning 2\.x way, "
            r"accelerator='gpu', devices=2, and keep strategy=DDPStrategy\(\.\.\.\)\.",
        ),
        (
            {"num_processes": 2, "strategy": "fsdp"},
            r"strategy='fsdp' is Lightning 2\.x's own.*accelerator='cpu', devices=2, and keep",
        ),
        (
            {"num_processes": 2, "plugins": [pl.plugins.MixedPrecision("bf16-mixed", "cpu")]},
            r"MixedPrecision\(\.\.\.\)\] is a Lightning precision plugin.*"
            r"Fix: pass precision='bf16-mixed' instead",
        ),
        ({"strategy": "dp"}, r"Trainer\(strategy='dp'\): 'dp' was a Lightning 1\.x training type"),
        ({"accelerator": "horovod"}, r"Fix: Lightning 2\.0 removed Horovod: strategy='ddp'"),
        ({"accelerator": "ddp_sharded"}, r"strategy='fsdp'"),
        # 1.2-1.4's documented spelling of sharded training, and 1.0-1.1's keyword
        (
            {"gpus": 2, "plugins": "ddp_sharded"},
            r"Trainer\(plugins='ddp_sharded'\): 'ddp_sharded' was a Lightning 1\.x training type. "
            r"Fix: Lightning 2\.0 removed FairScale sharding: strategy='fsdp'",
        ),
        ({"plugins": ["ddp2"]}, r"Trainer\(plugins='ddp2'\): 'ddp2' was a Lightning 1\.x"),
        (
            {"distributed_backend": "ddp2"},
            r"Trainer\(distributed_backend='ddp2'\): 'ddp2' was a Lightning 1\.x training type",
        ),
        (
            {"max_epoch": 3},
            r"Trainer\(max_epoch=\.\.\.\): no such keyword.*Did you mean max_epochs=\?",
        ),
        ({"num_processes": 0}, r"Trainer\(num_processes=0\): num_processes=0 must be an int"),
    ],
)
def test_what_cannot_be_resolved_is_refused_before_any_rank_starts(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(MisconfigurationError, match=message):
        Trainer(logger=False, **kwargs)


class MyDDP(DDPPlugin):
    def wrap_model(self, model: Any) -> Any:
        return model


def test_a_ddpkit_plugin_subclass_is_refused_not_half_run() -> None:
    with pytest.raises(MisconfigurationError, match=r"MyDDP.*subclass of ddpkit's DDPPlugin"):
        Trainer(num_processes=2, plugins=[MyDDP()], logger=False)


def test_the_plans_other_warnings_are_passed_on() -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        translation = translate_call(
            {"accelerator": "ddp_cpu", "num_processes": 2, "gpus": 1}, make_probe(gpus=1)
        )
    assert any("GPUs will not be used" in note for note in translation.notes)
    assert not [w for w in record if issubclass(w.category, DDPKitWarning)]  # the Trainer warns


# -- what Lightning answered with a raw error: a plan, or the fix -------------------------------


def test_a_lightning_environment_outside_its_job_is_refused_naming_the_launcher() -> None:
    # Lightning's own SLURMEnvironment reads SLURM_NTASKS: KeyError outside a SLURM job.
    with pytest.raises(
        MisconfigurationError,
        match=r"^Trainer\(num_processes=2, plugins=\[SLURMEnvironment\(\.\.\.\)\]\): "
        r"plugins=\[SLURMEnvironment\(\)\] reads the ranks of a job its launcher started, .*"
        r"Fix: start the script with that launcher \(srun for SLURMEnvironment",
    ):
        Trainer(num_processes=2, plugins=[SLURMEnvironment()], logger=False)


@pytest.mark.parametrize("name", ["accelerator", "devices", "strategy"])
def test_1x_none_defaults_of_the_device_flags_plan_one_cpu_process(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DDPKitWarning)  # 1.x's defaults: nothing to say
        trainer = Trainer(**{name: None}, logger=False)
    assert type(trainer.strategy) is SingleDeviceStrategy
    assert trainer.plan is not None and trainer.plan.world_size == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"accelerator": "ddp_cpuu"}, r"^Trainer\(accelerator='ddp_cpuu'\): no such accelerator in "
         r"Lightning 2\.x, nor in 1\.x \(did you mean 'ddp_cpu'\?\)\. Choose one of 'auto', 'cpu'"),
        ({"strategy": "ddp_spwn"}, r"^Trainer\(strategy='ddp_spwn'\): no such strategy .*\(did you "
         r"mean 'ddp_spawn'\?\)"),
        ({"accelerator": "ddp_cpuu", "num_processes": 2}, r"did you mean 'ddp_cpu'\?"),
    ],
)  # fmt: skip
def test_a_misspelt_device_name_gets_a_did_you_mean(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(MisconfigurationError, match=message):
        Trainer(**flags, logger=False)
