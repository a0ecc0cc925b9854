"""The check that the live objects are what the plan says, written apart from the connector's
own (``ddpkit.connector._build.disagreements``), so that a bug in one is caught by the other."""

from __future__ import annotations

import torch

from ddpkit._runtime.launch import SpawnLauncher, SubprocessLauncher
from ddpkit.connector import AcceleratorConnector

_LAUNCHERS = {SubprocessLauncher: "subprocess", SpawnLauncher: "spawn", type(None): "none"}


def assert_plan_is_what_runs(connector: AcceleratorConnector) -> None:
    plan, built = connector.plan, connector.built
    tt = built.training_type
    want_devices = [
        torch.device("cuda", i) if plan.accelerator.value == "gpu" else torch.device("cpu")
        for i in plan.devices.value
    ]
    assert tt.parallel_devices == want_devices, (plan.devices, tt.parallel_devices)
    assert tt.num_processes == len(plan.devices.value)
    assert tt.num_nodes == plan.num_nodes.value
    assert tt.world_size == len(plan.devices.value) * plan.num_nodes.value == plan.world_size
    assert tt.name == plan.training_type.value
    assert built.accelerator.name == plan.accelerator.value
    assert built.precision_plugin.precision == plan.precision.value
    assert tt.sync_batchnorm is plan.sync_batchnorm.value
    assert tt.cluster_environment is built.cluster_environment
    env = built.cluster_environment
    if plan.environment_instance is not None:
        assert env is plan.environment_instance
    else:
        assert env.name == plan.environment.value
    launcher = _LAUNCHERS[type(built.launcher)]
    if launcher == "spawn" and tt.start_method == "fork":  # type: ignore[attr-defined]
        launcher = "fork"  # the spawn launcher forks its ranks (ddp_notebook)
    assert launcher == (plan.launcher.value if plan.launcher.value != "external" else "none")
    for key, value in plan.training_type_options.items():
        assert getattr(tt, key) == value, (key, getattr(tt, key), value)
    if plan.backend.value is not None:
        assert tt.backend == plan.backend.value  # type: ignore[attr-defined]
    if plan.training_type_instance is not None:
        if plan.copies_instance:
            assert tt is not plan.training_type_instance
            assert type(tt) is type(plan.training_type_instance)
        else:
            assert tt is plan.training_type_instance
