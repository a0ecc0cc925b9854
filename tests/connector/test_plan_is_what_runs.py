"""What the plan says is what runs: explicit plugin fields are resolved into the plan, contradict
the flags loudly, and the built objects equal the plan in every case issue 13 reported."""

from __future__ import annotations

import datetime
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import pytest
import torch
from plan_checks import assert_plan_is_what_runs

from ddpkit import DDPPlugin, DDPSpawnPlugin, SingleDevicePlugin, Trainer
from ddpkit.accelerators import CPUAccelerator
from ddpkit.connector import AcceleratorConnector, Flags, resolve
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments import LocalEnvironment, TorchElasticEnvironment
from ddpkit.plugins.precision import PrecisionPlugin
from ddpkit.plugins.training_type import TrainingTypePlugin
from ddpkit.testing import make_probe

CPU = torch.device("cpu")


def connect(probe: Any = None, **flags: Any) -> AcceleratorConnector:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AcceleratorConnector(Flags.of(**flags), probe or make_probe())


def test_one_instance_in_two_trainers_keeps_each_trainers_plan() -> None:
    plugin = DDPPlugin()
    first = connect(accelerator="cpu", devices=2, strategy=plugin)
    second = connect(accelerator="cpu", devices=3, strategy=plugin)
    assert first.built.training_type is plugin  # the first Trainer uses the user's object
    assert second.built.training_type is not plugin  # the second a copy of it
    assert second.plan.copies_instance and "gets a copy" in second.plan.training_type.reason
    assert (first.plan.world_size, first.built.training_type.world_size) == (2, 2)
    assert (second.plan.world_size, second.built.training_type.world_size) == (3, 3)
    assert plugin.parallel_devices == [CPU, CPU]  # the user's object still says Trainer one's
    for connector in (first, second):
        assert_plan_is_what_runs(connector)


def test_parallel_devices_of_the_plugin_fill_the_devices() -> None:
    plugin = DDPPlugin(parallel_devices=[CPU] * 3)
    connector = connect(strategy=plugin)
    assert connector.plan.world_size == 3
    assert (
        connector.plan.devices.reason
        == "strategy=DDPPlugin(find_unused_parameters=True).parallel_devices"
    )
    assert_plan_is_what_runs(connector)


def test_parallel_devices_and_devices_that_disagree_name_both() -> None:
    plugin = DDPPlugin(parallel_devices=[CPU] * 3)
    with pytest.raises(MisconfigurationError) as err:
        connect(accelerator="cpu", devices=2, strategy=plugin)
    message = str(err.value)
    assert message.startswith(f"Trainer(accelerator='cpu', devices=2, strategy={plugin!r}): ")
    assert (
        "devices=2 and strategy=DDPPlugin(find_unused_parameters=True).parallel_devices disagree"
        in message
    )
    assert "Fix: pass only one of them." in message


def test_num_nodes_of_the_plugin_fills_num_nodes() -> None:
    env = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "NODE_RANK": "1"}
    connector = connect(make_probe(env=env), strategy=DDPPlugin(num_nodes=2))
    assert (connector.plan.num_nodes.value, connector.plan.world_size) == (2, 2)
    assert connector.built.training_type.global_rank == 1
    assert_plan_is_what_runs(connector)


def test_num_nodes_that_disagree_name_both() -> None:
    with pytest.raises(MisconfigurationError, match=r"num_nodes=3 and .*num_nodes=2 disagree"):
        connect(num_nodes=3, strategy=DDPPlugin(num_nodes=2))


@pytest.mark.parametrize("value", [-1, 0, 2.0, "2", True])
def test_a_bad_num_nodes_is_refused_where_it_is_written(value: Any) -> None:
    with pytest.raises(MisconfigurationError) as err:
        DDPPlugin(num_nodes=value)
    assert str(err.value).startswith(
        f"DDPPlugin(num_nodes={value!r}): num_nodes must be an int ≥ 1"
    )
    assert "Fix:" in str(err.value)


def test_torchrun_counts_the_devices_of_the_plugin() -> None:
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "GROUP_RANK": "1",
           "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}  # fmt: skip
    plugin = DDPPlugin(
        parallel_devices=[CPU, CPU], cluster_environment=TorchElasticEnvironment(env)
    )
    connector = connect(make_probe(env=env), num_nodes=2, strategy=plugin)
    assert connector.plan.launcher.value == "external"
    assert (connector.plan.world_size, plugin.global_rank, plugin.local_rank) == (4, 3, 1)
    assert_plan_is_what_runs(connector)


def test_torchelastic_environment_outside_torchrun_is_refused_at_construction() -> None:
    plugin = DDPPlugin(cluster_environment=TorchElasticEnvironment({}))
    with pytest.raises(MisconfigurationError) as err:
        connect(accelerator="cpu", devices=2, strategy=plugin)
    message = str(err.value)
    assert "torchrun did not start this process" in message
    assert "RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK, LOCAL_WORLD_SIZE are not set" in message
    assert "Fix: run `torchrun --nproc-per-node=2 script.py`" in message


class OneProcessPlugin(TrainingTypePlugin):
    """A user's own training type: it trains in the user's process."""


def test_a_users_own_training_type_runs_in_one_process() -> None:
    plugin = OneProcessPlugin()
    connector = connect(strategy=plugin)
    assert connector.plan.training_type.value == "custom"
    assert connector.plan.launcher.value == "none"
    assert connector.built.training_type.root_device == CPU
    assert_plan_is_what_runs(connector)
    with pytest.raises(MisconfigurationError, match=r"runs one process.*world size 2"):
        connect(accelerator="cpu", devices=2, strategy=OneProcessPlugin())


class MyDDP(DDPPlugin):
    pass


def test_a_subclass_of_ddp_plugin_is_launched_like_it() -> None:
    connector = connect(accelerator="cpu", devices=2, strategy=MyDDP())
    assert connector.plan.launcher.value == "subprocess"
    assert_plan_is_what_runs(connector)


class WrongWorldSize(DDPPlugin):
    @property
    def world_size(self) -> int:
        return 7


def test_a_subclass_that_contradicts_the_plan_is_refused() -> None:
    with pytest.raises(MisconfigurationError, match=r"world_size: plan 2, objects 7"):
        connect(accelerator="cpu", devices=2, strategy=WrongWorldSize())


def test_no_assert_guards_user_input_even_under_python_O() -> None:
    code = textwrap.dedent(
        """
        from ddpkit import DDPPlugin, Trainer
        from ddpkit.errors import MisconfigurationError
        from ddpkit.plugins.training_type import TrainingTypePlugin
        class Mine(TrainingTypePlugin):
            pass
        for make in (lambda: DDPPlugin(num_nodes=-1),
                     lambda: Trainer(accelerator="cpu", devices=2, strategy=Mine())):
            try:
                make()
            except MisconfigurationError as err:
                print("refused:", str(err).split(":")[0])
        """
    )
    out = subprocess.run(
        [sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "refused: DDPPlugin(num_nodes=-1)",
        "refused: Trainer(accelerator='cpu', devices=2, strategy=Mine())",
    ]


@pytest.mark.parametrize(
    ("flags", "kind", "unused"),
    [
        ({"accelerator": "ddp_cpu", "num_processes": 2}, "ddp_spawn", True),
        ({"num_processes": 2}, "ddp_spawn", True),
        ({"accelerator": "ddp", "num_processes": 2}, "ddp", True),
        ({"plugins": ["ddp"], "num_processes": 2}, "ddp", True),
        ({"accelerator": "cpu", "devices": 2}, "ddp", False),
        ({"accelerator": "cpu", "devices": 2, "strategy": "ddp"}, "ddp", False),
        ({"accelerator": "cpu", "devices": 2, "strategy": "ddp_spawn"}, "ddp_spawn", False),
        ({"accelerator": "cpu", "devices": 2, "strategy": "ddp_find_unused_parameters_true"}, "ddp", True),
    ],
)  # fmt: skip
def test_find_unused_parameters_keeps_each_spellings_default(
    flags: dict[str, Any], kind: str, unused: bool
) -> None:
    connector = connect(**flags)
    plugin = connector.built.training_type
    assert (plugin.name, plugin.find_unused_parameters) == (kind, unused)  # type: ignore[attr-defined]
    assert connector.plan.training_type_options["find_unused_parameters"] is unused
    assert_plan_is_what_runs(connector)


def test_ddp_plugin_defaults_to_1x_find_unused_parameters() -> None:
    assert DDPPlugin().find_unused_parameters is True
    assert DDPSpawnPlugin().find_unused_parameters is True


@pytest.mark.parametrize(
    ("num_processes", "num_nodes", "kind"),
    [(1, 1, "ddp_spawn"), (1, 2, "ddp"), (2, 1, "ddp_spawn"), (2, 2, "ddp_spawn")],
)
def test_ddp_cpu_keeps_1_4s_training_types(num_processes: int, num_nodes: int, kind: str) -> None:
    # Lightning 1.4's test_accelerator_choice_ddp_cpu: one process per node on several nodes is
    # DDP (nothing to spawn); otherwise ddp_cpu spawns, even a single process.
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "NODE_RANK": "0"}
    flags = Flags.of(accelerator="ddp_cpu", num_processes=num_processes, num_nodes=num_nodes)
    plan = resolve(flags, make_probe(env=env))
    assert plan.training_type.value == kind
    assert plan.environment.value == "local"


def test_fast_dev_run_does_not_change_the_training_type(machine: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quick = Trainer(fast_dev_run=True, accelerator="ddp_cpu")
        plain = Trainer(accelerator="ddp_cpu")
    assert type(quick.training_type_plugin) is type(plain.training_type_plugin) is DDPSpawnPlugin


def test_interactive_session_forks_an_unnamed_launcher_and_refuses_named_subprocess_ddp() -> None:
    """docs/notebooks.md: the device count's default launcher and 1.x's ddp_cpu default become
    the fork launcher, with one line; a named ``ddp`` is refused, naming ddp_notebook; a named
    ``ddp_spawn`` is kept (its launcher checks what it pickles)."""
    probe = make_probe(interactive=True)
    for flags in (
        {"accelerator": "cpu", "devices": 2},
        {"accelerator": "ddp_cpu", "num_processes": 2},
        {"num_processes": 2},
        {"accelerator": "cpu", "devices": 2, "strategy": "ddp_notebook"},
        {"accelerator": "cpu", "devices": 2, "strategy": "ddp_fork"},
    ):
        connector = connect(probe, **flags)
        plan = connector.plan
        assert (plan.training_type.value, plan.launcher.value) == ("ddp_spawn", "fork"), flags
        assert connector.built.training_type.start_method == "fork"  # type: ignore[attr-defined]
        notes = [w.message for w in plan.warnings if "interactive session" in w.message]
        assert len(notes) == (0 if "strategy" in flags else 1), (flags, notes)
        assert_plan_is_what_runs(connector)
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=2, strategy="ddp"), probe)
    assert str(err.value).startswith(
        "Trainer(accelerator='cpu', devices=2, strategy='ddp'): DDP re-runs the script"
    )
    assert "Fix: strategy='ddp_notebook'" in str(err.value)
    spawn = resolve(Flags.of(accelerator="cpu", devices=2, strategy="ddp_spawn"), probe)
    assert spawn.launcher.value == "spawn"
    script = resolve(Flags.of(accelerator="cpu", devices=2, strategy="ddp_notebook"), make_probe())
    assert script.launcher.value == "fork"  # asked for by name: a script forks too


def test_pl_torch_distributed_backend_is_honoured() -> None:
    probe = make_probe(env={"PL_TORCH_DISTRIBUTED_BACKEND": "gloo"})
    connector = connect(probe, accelerator="cpu", devices=2)
    assert connector.plan.backend.value == "gloo"
    assert connector.plan.backend.reason == "PL_TORCH_DISTRIBUTED_BACKEND=gloo"
    assert connector.built.training_type.backend == "gloo"  # type: ignore[attr-defined]
    with pytest.raises(MisconfigurationError, match=r"NCCL, which runs on CUDA GPUs only"):
        connect(
            make_probe(env={"PL_TORCH_DISTRIBUTED_BACKEND": "nccl"}), accelerator="cpu", devices=2
        )
    with pytest.raises(
        MisconfigurationError,
        match=r"'glo' is not a torch.distributed backend \(did you mean 'gloo'\?\)",
    ):
        connect(
            make_probe(env={"PL_TORCH_DISTRIBUTED_BACKEND": "glo"}), accelerator="cpu", devices=2
        )


def test_the_plugins_backend_beats_the_variable() -> None:
    probe = make_probe(env={"PL_TORCH_DISTRIBUTED_BACKEND": "mpi"})
    plugin = DDPPlugin(process_group_backend="gloo")
    connector = connect(probe, accelerator="cpu", devices=2, strategy=plugin)
    assert connector.plan.backend.value == "gloo"
    assert_plan_is_what_runs(connector)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"timeout": "abc"}, r"DDPPlugin\(.*timeout='abc'.*\): timeout must be a number of seconds"),
        ({"timeout": float("nan")}, r"timeout=nan is not a positive, finite time"),
        ({"timeout": 0}, r"timeout=0 is not a positive, finite time"),
        ({"timeout": -1}, r"timeout=-1 is not a positive, finite time"),
        ({"timeout": 1e20}, r"timeout=1e\+20 s is longer than 30 days"),
        ({"timeout": [5]}, r"timeout must be a number of seconds.*not list"),
        ({"find_unused_parameters": "yes"}, r"find_unused_parameters must be True or False"),
        ({"process_group_backend": "glo"}, r"'glo' is not a torch.distributed backend.*did you mean 'gloo'"),
        ({"bucket_cap_mbb": 25}, r"bucket_cap_mbb= is neither .*did you mean 'bucket_cap_mb'"),
        ({"device_ids": [0]}, r"device_ids is set by ddpkit"),
        ({"parallel_devices": "cpu"}, r"parallel_devices must be a list of devices"),
        ({"parallel_devices": ["potato"]}, r"parallel_devices holds something that is not a device"),
        ({"cluster_environment": "local"}, r"cluster_environment must be a ClusterEnvironment"),
    ],
)  # fmt: skip
def test_bad_plugin_arguments_are_refused_with_the_call(
    kwargs: dict[str, Any], pattern: str
) -> None:
    with pytest.raises(MisconfigurationError, match=pattern) as err:
        DDPPlugin(**kwargs)
    assert (
        "Fix:" in str(err.value) or "Choose one of" in str(err.value) or "takes" in str(err.value)
    )


def test_timeouts_that_work() -> None:
    assert DDPPlugin(timeout=90).timeout == datetime.timedelta(seconds=90)
    assert DDPPlugin(timeout=datetime.timedelta(minutes=2)).timeout == datetime.timedelta(minutes=2)


def test_spawn_start_method_is_a_closed_set() -> None:
    with pytest.raises(
        MisconfigurationError,
        match=r"start_method='junk' is not a start method.*'forkserver', 'spawn'",
    ):
        DDPSpawnPlugin(start_method="junk")
    assert DDPSpawnPlugin(start_method="forkserver").start_method == "forkserver"


@pytest.mark.parametrize(
    ("flags", "quoted"),
    [
        ({"num_nodes": "2"}, "Trainer(num_nodes='2')"),
        ({"precision": 32.0}, "Trainer(precision=32.0)"),
        ({"devices": 2**70}, f"Trainer(devices={2**70})"),
        ({"devices": 10**7}, f"Trainer(devices={10**7})"),
        ({"accelerator": "cpu", "devices": "abc"}, "Trainer(accelerator='cpu', devices='abc')"),
        ({"strategy": "dpp"}, "Trainer(strategy='dpp')"),
        ({"sync_batchnorm": "yes"}, "Trainer(sync_batchnorm='yes')"),
    ],
)
def test_errors_quote_the_call_exactly_as_written(flags: dict[str, Any], quoted: str) -> None:
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(**flags), make_probe())
    assert str(err.value).startswith(f"{quoted}: ")
    assert "Fix:" in str(err.value) or "Choose one of" in str(err.value)


def test_closed_sets_suggest_the_near_miss() -> None:
    for flags, near in (
        ({"strategy": "dpp"}, "'ddp'"),
        ({"accelerator": "cpuu"}, "'cpu'"),
        ({"precision": "bf61"}, "'bf16'"),
        ({"plugins": ["ddp_spwan"]}, "'ddp_spawn'"),
    ):
        with pytest.raises(MisconfigurationError, match=rf"did you mean {near}\?"):
            resolve(Flags.of(**flags), make_probe())


class V14Environment(LocalEnvironment):
    """A Lightning 1.4 user's environment: the 1.x method names only."""

    def master_address(self) -> str:
        return "10.9.8.7"

    def master_port(self) -> int:
        return 12910


def test_a_1x_environment_subclass_plugs_in() -> None:
    env = V14Environment({})
    connector = connect(accelerator="cpu", devices=2, plugins=[env])
    assert connector.built.cluster_environment is env
    assert (env.main_address(), env.main_port(), env.requested_port()) == ("10.9.8.7", 12910, 12910)
    assert_plan_is_what_runs(connector)


def test_an_environment_missing_methods_is_refused_with_their_names() -> None:
    from ddpkit.plugins.environments import ClusterEnvironment

    class Half(ClusterEnvironment):
        def master_address(self) -> str:
            return "127.0.0.1"

    with pytest.raises(MisconfigurationError) as err:
        connect(accelerator="cpu", devices=2, plugins=[Half()])
    assert "does not implement main_port (or master_port), creates_processes_externally" in str(
        err.value
    )


def test_a_1x_accelerator_carries_its_plugins() -> None:
    ttp = SingleDevicePlugin(torch.device("cpu"))
    precision = PrecisionPlugin()
    connector = connect(
        accelerator=CPUAccelerator(training_type_plugin=ttp, precision_plugin=precision)
    )
    assert connector.built.training_type is ttp
    assert connector.built.precision_plugin is precision
    assert_plan_is_what_runs(connector)


def test_an_xdist_worker_is_a_pytest_session_not_an_interactive_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pytest-xdist worker runs as ``python -c``; it is still a pytest session, whose DDPPlugin
    Trainers build as in a plain session (their fit is refused at launch, or run standalone)."""
    import types

    from ddpkit.connector._probe import Probe

    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # python -c
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert Probe.capture().interactive
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")  # what xdist's worker code sets
    assert "xdist.plugin" in sys.modules  # pytest loads it wherever xdist is installed
    assert not Probe.capture().interactive
    Trainer(accelerator="cpu", devices=2)  # builds, as under plain pytest
