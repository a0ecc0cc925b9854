"""Every row of DESIGN.md's resolution contract, on a real Trainer's public surface."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from ddpkit import DDPPlugin, DDPSpawnPlugin, SingleDevicePlugin, Trainer
from ddpkit._runtime.launch import SpawnLauncher, SubprocessLauncher
from ddpkit.accelerators import CPUAccelerator, GPUAccelerator
from ddpkit.errors import DDPKitDeprecationWarning, DDPKitWarning, MisconfigurationError
from ddpkit.plugins.environments import (
    ClusterEnvironment,
    LocalEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)

Machine = Callable[..., None]

CPU = torch.device("cpu")


def build(**flags: Any) -> tuple[Trainer, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = Trainer(**flags)
    return trainer, [w for w in caught if issubclass(w.category, DDPKitWarning)]


def launcher_of(trainer: Trainer) -> str:
    launcher = trainer.accelerator_connector.built.launcher
    return {SubprocessLauncher: "subprocess", SpawnLauncher: "spawn", type(None): "none"}[
        type(launcher)
    ]


# (flags, plugin class, launcher, number of processes, warning pattern or None)
CPU_ROWS = [
    pytest.param({}, SingleDevicePlugin, "none", 1, None, id="default"),
    pytest.param(
        {"accelerator": "ddp_cpu", "num_processes": 2}, DDPSpawnPlugin, "spawn", 2,
        r"spawn.*deprecated.*strategy='ddp_spawn_find_unused_parameters_true'.*strategy='ddp_find_unused_parameters_true'",
        id="ddp_cpu",
    ),
    pytest.param(
        {"num_processes": 2}, DDPSpawnPlugin, "spawn", 2,
        r"accelerator='cpu', devices=2, strategy='ddp_spawn_find_unused_parameters_true'",
        id="num_processes",
    ),
    pytest.param(
        {"accelerator": "ddp", "num_processes": 2}, DDPPlugin, "subprocess", 2,
        r"accelerator='ddp'.*Trainer\(accelerator='cpu', devices=2, strategy='ddp_find_unused_parameters_true'\)",
        id="legacy_ddp",
    ),
    pytest.param(
        {"accelerator": "ddp_spawn", "num_processes": 2}, DDPSpawnPlugin, "spawn", 2,
        r"Trainer\(accelerator='cpu', devices=2, strategy='ddp_spawn_find_unused_parameters_true'\)",
        id="legacy_ddp_spawn",
    ),
    pytest.param(
        {"accelerator": "ddp_cpu_spawn", "num_processes": 2}, DDPSpawnPlugin, "spawn", 2,
        r"Trainer\(accelerator='cpu', devices=2, strategy='ddp_spawn_find_unused_parameters_true'\)",
        id="ddp_cpu_spawn",
    ),
    pytest.param(
        {"accelerator": "cpu", "devices": 2}, DDPPlugin, "subprocess", 2, None, id="modern"
    ),
    pytest.param(
        {"accelerator": "cpu", "devices": 2, "strategy": "ddp_spawn"}, DDPSpawnPlugin, "spawn",
        2, None, id="modern_spawn",
    ),
    pytest.param(
        {"devices": 2}, DDPPlugin, "subprocess", 2, None, id="devices_auto_accelerator"
    ),
    pytest.param(
        {"accelerator": "cpu", "devices": "auto"}, SingleDevicePlugin, "none", 1, None,
        id="devices_auto",
    ),
    pytest.param(
        {"accelerator": "cpu", "devices": "2"}, DDPPlugin, "subprocess", 2, None,
        id="devices_string_count",
    ),
    pytest.param(
        {"accelerator": "cpu", "devices": 1, "strategy": "ddp"}, DDPPlugin, "subprocess", 1,
        None, id="ddp_one_process",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("flags", "plugin_cls", "launcher", "nproc", "warning"), CPU_ROWS)
def test_cpu_rows(
    machine: Machine,
    flags: dict[str, Any],
    plugin_cls: type,
    launcher: str,
    nproc: int,
    warning: str | None,
) -> None:
    trainer, caught = build(**flags)
    assert isinstance(trainer.accelerator, CPUAccelerator)
    assert type(trainer.training_type_plugin) is plugin_cls
    assert trainer.strategy is trainer.training_type_plugin
    assert launcher_of(trainer) == launcher
    assert trainer.num_processes == nproc
    assert trainer.world_size == nproc
    assert trainer.training_type_plugin.parallel_devices == [CPU] * nproc
    assert trainer.root_device == CPU
    assert isinstance(trainer.cluster_environment, LocalEnvironment)
    if warning is None:
        assert caught == []
    else:
        assert len(caught) == 1, [str(w.message) for w in caught]
        assert caught[0].category is DDPKitDeprecationWarning
        assert re.search(warning, str(caught[0].message)), str(caught[0].message)


@pytest.mark.parametrize(
    "instance",
    [DDPSpawnPlugin(find_unused_parameters=True), DDPPlugin(find_unused_parameters=True)],
    ids=["spawn_instance", "ddp_instance"],
)
def test_ddp_cpu_with_explicit_plugin_uses_it_and_does_not_warn(
    machine: Machine, instance: DDPPlugin
) -> None:
    trainer, caught = build(accelerator="ddp_cpu", num_processes=2, plugins=[instance])
    assert trainer.training_type_plugin is instance
    assert instance.find_unused_parameters is True
    assert isinstance(trainer.accelerator, CPUAccelerator)
    assert launcher_of(trainer) == (
        "spawn" if isinstance(instance, DDPSpawnPlugin) else "subprocess"
    )
    assert instance.parallel_devices == [CPU, CPU]
    assert instance.num_processes == 2
    assert isinstance(instance.cluster_environment, LocalEnvironment)
    assert caught == []
    plan = trainer.accelerator_connector.plan
    assert "used as given" in plan.training_type.reason
    assert plan.devices.reason == "num_processes=2"


def test_num_processes_with_ddp_plugin_needs_no_gpu(machine: Machine) -> None:
    plugin = DDPPlugin()
    trainer, caught = build(num_processes=2, plugins=[plugin])
    assert trainer.training_type_plugin is plugin
    assert isinstance(trainer.accelerator, CPUAccelerator)
    assert launcher_of(trainer) == "subprocess"
    assert trainer.world_size == 2
    assert caught == []


@pytest.mark.parametrize(
    ("name", "kind", "unused"),
    [
        ("ddp_find_unused_parameters_false", DDPPlugin, False),
        ("ddp_find_unused_parameters_true", DDPPlugin, True),
        ("ddp_spawn_find_unused_parameters_false", DDPSpawnPlugin, False),
        ("ddp_spawn_find_unused_parameters_true", DDPSpawnPlugin, True),
    ],
)
def test_registry_strings(machine: Machine, name: str, kind: type, unused: bool) -> None:
    trainer, caught = build(plugins=[name], num_processes=2)
    plugin = trainer.training_type_plugin
    assert type(plugin) is kind
    assert isinstance(plugin, DDPPlugin) and plugin.find_unused_parameters is unused
    assert caught == []
    trainer, _ = build(strategy=name, accelerator="cpu", devices=2)
    assert type(trainer.training_type_plugin) is kind


@pytest.mark.parametrize(
    ("flags", "first", "second"),
    [
        ({"plugins": [DDPPlugin(), DDPSpawnPlugin()]}, "plugins=[DDPPlugin", "plugins=[DDPSpawnPlugin"),
        ({"strategy": "ddp", "plugins": [DDPPlugin()]}, "strategy='ddp'", "plugins=[DDPPlugin"),
        ({"strategy": DDPPlugin(), "plugins": ["ddp_spawn"]}, "strategy=DDPPlugin", "plugins=['ddp_spawn']"),
    ],
    ids=["two_plugins", "strategy_and_plugin", "instance_and_name"],
)  # fmt: skip
def test_two_training_types_is_an_error_naming_both(
    machine: Machine, flags: dict[str, Any], first: str, second: str
) -> None:
    with pytest.raises(MisconfigurationError, match="two training types") as err:
        Trainer(num_processes=2, **flags)
    assert first in str(err.value) and second in str(err.value)
    assert "Fix:" in str(err.value)


def test_gpu_without_gpu_is_an_error(machine: Machine) -> None:
    with pytest.raises(MisconfigurationError, match=r"accelerator='gpu'.*no GPU is visible"):
        Trainer(accelerator="gpu")
    with pytest.raises(MisconfigurationError, match=r"gpus=2 asks for a GPU.*no GPU is visible"):
        Trainer(gpus=2)


# -- machines with two GPUs ------------------------------------------------------------------


def test_gpus_2_is_legacy_spawn(machine: Machine) -> None:
    machine(gpus=2)
    trainer, caught = build(gpus=2)
    assert isinstance(trainer.accelerator, GPUAccelerator)
    assert type(trainer.training_type_plugin) is DDPSpawnPlugin
    assert trainer.training_type_plugin.parallel_devices == [
        torch.device("cuda", 0), torch.device("cuda", 1),
    ]  # fmt: skip
    assert launcher_of(trainer) == "spawn"
    assert trainer.device_ids == [0, 1]
    assert len(caught) == 1 and caught[0].category is DDPKitDeprecationWarning
    assert (
        "Trainer(accelerator='gpu', devices=2, strategy='ddp_spawn_find_unused_parameters_true')"
        in str(caught[0].message)
    )
    assert not torch.cuda.is_initialized()


@pytest.mark.parametrize(
    ("flags", "warns"),
    [
        ({"accelerator": "ddp", "gpus": 2}, True),
        ({"accelerator": "gpu", "devices": 2}, False),
        ({"accelerator": "cuda", "devices": 2}, False),
    ],
)
def test_ddp_on_two_gpus(machine: Machine, flags: dict[str, Any], warns: bool) -> None:
    machine(gpus=2)
    trainer, caught = build(**flags)
    assert isinstance(trainer.accelerator, GPUAccelerator)
    assert type(trainer.training_type_plugin) is DDPPlugin
    assert launcher_of(trainer) == "subprocess"
    assert trainer.num_devices == 2 and trainer.world_size == 2
    assert trainer.root_device == torch.device("cuda", 0)
    if warns:
        assert len(caught) == 1
        modern = "Trainer(accelerator='gpu', devices=2, strategy='ddp_find_unused_parameters_true')"
        assert modern in str(caught[0].message)
    else:
        assert caught == []


def test_ddp_cpu_with_gpus_warns_gpus_unused(machine: Machine) -> None:
    machine(gpus=2)
    trainer, caught = build(accelerator="ddp_cpu", num_processes=2, gpus=1)
    assert isinstance(trainer.accelerator, CPUAccelerator)
    assert type(trainer.training_type_plugin) is DDPSpawnPlugin
    assert launcher_of(trainer) == "spawn"
    unused = [w for w in caught if w.category is DDPKitWarning]
    assert len(unused) == 1
    assert "gpus=1 is ignored" in str(unused[0].message)
    assert "GPUs will not be used" in str(unused[0].message)
    assert any(w.category is DDPKitDeprecationWarning for w in caught)


@pytest.mark.parametrize(
    ("flags", "ids"),
    [
        ({"gpus": [1]}, [1]),
        ({"gpus": "1,"}, [1]),
        ({"gpus": -1}, [0, 1]),
        ({"gpus": "-1"}, [0, 1]),
        ({"gpus": "0,1"}, [0, 1]),
        ({"gpus": 1}, [0]),
        ({"accelerator": "gpu", "devices": [1]}, [1]),
        ({"accelerator": "gpu", "devices": -1}, [0, 1]),
        ({"accelerator": "gpu", "devices": "auto"}, [0, 1]),
        ({"accelerator": "auto"}, [0]),
        ({}, [0]),
    ],
)
def test_gpu_device_spellings(machine: Machine, flags: dict[str, Any], ids: list[int]) -> None:
    machine(gpus=2)
    trainer, _ = build(**flags)
    assert isinstance(trainer.accelerator, GPUAccelerator)
    assert trainer.device_ids == ids
    expected = [torch.device("cuda", i) for i in ids]
    assert trainer.training_type_plugin.parallel_devices == expected
    assert trainer.root_device == expected[0]
    expected_type = SingleDevicePlugin if len(ids) == 1 else (DDPSpawnPlugin, DDPPlugin)
    assert isinstance(trainer.training_type_plugin, expected_type)


def test_auto_accelerator_without_gpus_is_cpu(machine: Machine) -> None:
    trainer, _ = build(accelerator="auto")
    assert isinstance(trainer.accelerator, CPUAccelerator)
    assert "no CUDA device visible" in trainer.accelerator_connector.plan.accelerator.reason


def test_num_nodes_multiplies_world_size(machine: Machine) -> None:
    trainer, _ = build(accelerator="cpu", devices=2, num_nodes=2)
    assert trainer.num_nodes == 2
    assert trainer.num_processes == 2
    assert trainer.world_size == 4
    assert type(trainer.training_type_plugin) is DDPPlugin
    trainer, _ = build(accelerator="cpu", devices=1, num_nodes=3)
    assert trainer.world_size == 3 and type(trainer.training_type_plugin) is DDPPlugin


# -- errors, each matched on its values --------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "pattern"),
    [
        ({"accelerator": "cpu", "devices": [0, 1]}, r"devices=\[0, 1\] lists GPU ids.*devices=2"),
        ({"accelerator": "cpu", "devices": 0}, r"devices=0 asks for 0 CPU processes"),
        ({"num_processes": 0}, r"num_processes=0 must be an int from 1 to 1024"),
        ({"num_nodes": 0}, r"num_nodes=0 must be an int from 1 to"),
        ({"devices": "two"}, r"devices='two'.*expected a count"),
        ({"devices": -2}, r"devices=-2.*≥ 0, or -1"),
        ({"strategy": "fancy"}, r"strategy='fancy' is not a training type.*'ddp', 'ddp_find_unused"),
        ({"plugins": ["fancy"]}, r"plugins=\['fancy'\] is not a training type"),
        ({"accelerator": "fancy"}, r"unknown accelerator='fancy'.*'auto', 'cpu', 'cuda', 'gpu'"),
        ({"precision": 8}, r"precision=8 is not supported.*'16-mixed', '32-true', '64-true'"),
        ({"precision": "16-mixed"}, r"precision='16-mixed' needs a GPU.*bf16-mixed"),
        ({"plugins": [object()]}, r"is not a training type, cluster environment, precision"),
        ({"strategy": "single_device", "devices": 2}, r"runs one process.*world size 2"),
        ({"strategy": SingleDevicePlugin(), "devices": 2}, r"SingleDevicePlugin.*runs one process.*world size 2"),
        ({"accelerator": "ddp_spawn", "plugins": [DDPPlugin()]}, r"asks for 'ddp_spawn'.*'ddp'"),
    ],
)  # fmt: skip
def test_bad_flags_name_the_values(machine: Machine, flags: dict[str, Any], pattern: str) -> None:
    with pytest.raises(MisconfigurationError, match=pattern):
        Trainer(**flags)


@pytest.mark.parametrize(
    ("flags", "gpus", "count"),
    [({"devices": 2, "num_processes": 3}, 0, 3), ({"devices": 1, "gpus": 2}, 2, 2)],
)
def test_a_1x_device_count_beside_devices_wins_with_a_warning(
    machine: Machine, flags: dict[str, Any], gpus: int, count: int
) -> None:
    """Lightning 1.6 (trainer/connectors/accelerator_connector.py, 1.6.5 lines 456-461, where
    devices met num_processes or gpus): the device-specific flag was used and devices ignored,
    with a warning. A 1.x script's parser default (devices=1) beside --num_processes 2 ran so."""
    machine(gpus=gpus)
    with pytest.warns(DDPKitWarning, match=rf"devices={flags['devices']} is ignored; the device "
                      r"count of (num_processes|gpus) is used, as Lightning 1\.6 did"):  # fmt: skip
        trainer = Trainer(**flags)
    assert trainer.world_size == count


@pytest.mark.parametrize("name", ["dp", "ddp2", "horovod", "tpu"])
@pytest.mark.parametrize("flag", ["accelerator", "strategy"])
def test_unsupported_names_say_what_ddpkit_supports(machine: Machine, flag: str, name: str) -> None:
    with pytest.raises(MisconfigurationError, match=rf"{flag}='{name}' is not supported") as err:
        Trainer(**{flag: name})
    assert "'ddp'" in str(err.value) or "'cpu'" in str(err.value)


@pytest.mark.parametrize("name", ["ddp2", "ddp_sharded", "ddp_sharded_spawn", "deepspeed"])
def test_another_trainers_name_in_plugins_says_why_it_is_not_supported(
    machine: Machine, name: str
) -> None:
    # 1.2-1.4 documented Trainer(gpus=2, plugins="ddp_sharded"): no did-you-mean 'ddp_spawn'
    with pytest.raises(MisconfigurationError, match=rf"plugins=\['{name}'\] is not supported: "):
        Trainer(plugins=[name])


@pytest.mark.parametrize(
    ("flags", "pattern"),
    [
        ({"accelerator": "gpu", "devices": 3}, r"devices=3 asks for 3 GPUs.*device_count\(\) = 2"),
        ({"gpus": [2]}, r"gpus=\[2\] names GPU 2.*ids 0..1"),
        ({"gpus": 2, "num_processes": 2}, r"num_processes=2 counts CPU processes"),
    ],
)
def test_bad_gpu_flags(machine: Machine, flags: dict[str, Any], pattern: str) -> None:
    machine(gpus=2)
    with pytest.raises(MisconfigurationError, match=pattern):
        Trainer(**flags)


# -- environments ------------------------------------------------------------------------------

TORCHRUN = {
    "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "GROUP_RANK": "0",
    "LOCAL_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
}  # fmt: skip


@pytest.mark.parametrize(
    "flags",
    [
        {"accelerator": "ddp_cpu", "num_processes": 2},
        {"accelerator": "cpu", "devices": 2, "strategy": "ddp_spawn"},
        {"accelerator": "cpu", "devices": 2, "strategy": "ddp"},
        {"accelerator": "ddp", "num_processes": 2},
    ],
)
def test_under_torchrun_ddp_is_used_and_nothing_launched(
    machine: Machine, flags: dict[str, Any]
) -> None:
    machine(env=TORCHRUN)
    trainer, caught = build(**flags)
    assert type(trainer.training_type_plugin) is DDPPlugin
    assert trainer.accelerator_connector.built.launcher is None
    assert trainer.accelerator_connector.plan.launcher.value == "external"
    assert isinstance(trainer.cluster_environment, TorchElasticEnvironment)
    assert trainer.global_rank == 1 and trainer.local_rank == 1
    assert caught == []  # rank 1 never warns


def test_torchrun_world_size_mismatch_shows_the_arithmetic(machine: Machine) -> None:
    machine(env=TORCHRUN)
    with pytest.raises(MisconfigurationError) as err:
        Trainer(accelerator="cpu", devices=4, num_nodes=2)
    assert "devices(4) × num_nodes(2) = 8, but torchrun started WORLD_SIZE=2" in str(err.value)
    assert "devices=2, num_nodes=1" in str(err.value)


def test_explicit_spawn_instance_under_torchrun_is_an_error(machine: Machine) -> None:
    machine(env=TORCHRUN)
    with pytest.raises(MisconfigurationError, match=r"spawns ranks, but torchelastic"):
        Trainer(accelerator="cpu", devices=2, strategy=DDPSpawnPlugin())


SLURM = {
    "SLURM_NTASKS": "2", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
    "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "1234", "SLURM_JOB_NAME": "python",
    "SLURM_NODELIST": "node[01-02]", "SLURM_NNODES": "1",
}  # fmt: skip


def test_slurm_managed_tasks(machine: Machine) -> None:
    machine(env=SLURM)
    trainer, _ = build(accelerator="ddp_cpu", num_processes=2)
    assert type(trainer.training_type_plugin) is DDPPlugin
    assert isinstance(trainer.cluster_environment, SLURMEnvironment)
    assert trainer.accelerator_connector.built.launcher is None
    assert trainer.cluster_environment.main_address() == "node01"


def test_slurm_batch_step_runs_locally(machine: Machine) -> None:
    env = {k: v for k, v in SLURM.items() if k != "SLURM_STEP_ID"}
    machine(env=env)
    trainer, _ = build(accelerator="cpu", devices=2)
    assert isinstance(trainer.cluster_environment, LocalEnvironment)
    assert launcher_of(trainer) == "subprocess"
    assert "batch step" in trainer.accelerator_connector.plan.environment.reason


class MyEnvironment(LocalEnvironment):
    """A user's environment: ddpkit starts the ranks, ranks come from the user's scheme."""


def test_user_environment_beats_detection(machine: Machine) -> None:
    machine(env=TORCHRUN)
    mine = MyEnvironment()
    plugin = DDPPlugin()
    trainer, _ = build(accelerator="cpu", devices=2, plugins=[plugin, mine])
    assert trainer.cluster_environment is mine
    assert plugin.cluster_environment is mine
    # LOCAL_RANK is set: this process is one rank of a job someone else started (Lightning
    # 1.5's "manual launch"), so it starts nothing.
    assert launcher_of(trainer) == "none"
    assert trainer.accelerator_connector.plan.launcher.value == "external"
    assert "the user's environment" in trainer.accelerator_connector.plan.environment.reason


def test_plugin_instance_keeps_its_own_environment(machine: Machine) -> None:
    env: ClusterEnvironment = MyEnvironment()
    plugin = DDPPlugin(cluster_environment=env)
    trainer, _ = build(accelerator="cpu", devices=2, strategy=plugin)
    assert trainer.training_type_plugin.cluster_environment is env
