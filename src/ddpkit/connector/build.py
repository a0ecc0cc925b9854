"""Plan → live objects. Decides nothing: every choice is already in the plan."""

from __future__ import annotations

from dataclasses import dataclass

from ddpkit.accelerators import Accelerator, CPUAccelerator, GPUAccelerator
from ddpkit.connector.plan import Plan
from ddpkit.connector.probe import Probe
from ddpkit.launchers import Launcher, make_launcher
from ddpkit.plugins.environments import (
    ClusterEnvironment,
    LocalEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)
from ddpkit.plugins.precision import DoublePrecisionPlugin, MixedPrecisionPlugin, PrecisionPlugin
from ddpkit.plugins.training_type import (
    DDPPlugin,
    DDPSpawnPlugin,
    SingleDevicePlugin,
    TrainingTypePlugin,
)

__all__ = ["Built", "build"]

_ACCELERATORS: dict[str, type[Accelerator]] = {"cpu": CPUAccelerator, "gpu": GPUAccelerator}
_ENVIRONMENTS: dict[str, type[ClusterEnvironment]] = {
    "local": LocalEnvironment,
    "torchelastic": TorchElasticEnvironment,
    "slurm": SLURMEnvironment,
}


@dataclass(frozen=True)
class Built:
    """The live objects of one plan, each complete."""

    accelerator: Accelerator
    training_type: TrainingTypePlugin
    precision_plugin: PrecisionPlugin
    cluster_environment: ClusterEnvironment
    launcher: Launcher | None


def _precision(name: str) -> PrecisionPlugin:
    if name == "64-true":
        return DoublePrecisionPlugin()
    if name in ("16-mixed", "bf16-mixed"):
        return MixedPrecisionPlugin(name)
    return PrecisionPlugin()


def build(plan: Plan, probe: Probe) -> Built:
    accelerator = plan.accelerator_instance or _ACCELERATORS[plan.accelerator.value]()
    environment = plan.environment_instance or _ENVIRONMENTS[plan.environment.value](probe.env)
    precision = plan.precision_instance or _precision(plan.precision.value)
    precision.setup(accelerator.device_type)
    devices = [accelerator.device(i) for i in plan.devices.value]
    training_type = plan.training_type_instance
    if training_type is None:
        kind = plan.training_type.value
        if kind == "single_device":
            training_type = SingleDevicePlugin(devices[0])
        elif kind == "ddp_spawn":
            training_type = DDPSpawnPlugin(**plan.training_type_options)
        else:
            training_type = DDPPlugin(**plan.training_type_options)
    training_type.connect(
        accelerator=accelerator,
        precision_plugin=precision,
        cluster_environment=environment,
        parallel_devices=devices,
        num_nodes=plan.num_nodes.value,
        sync_batchnorm=plan.sync_batchnorm.value,
    )
    return Built(
        accelerator=accelerator,
        training_type=training_type,
        precision_plugin=precision,
        cluster_environment=training_type.cluster_environment or environment,
        launcher=make_launcher(plan.launcher.value, training_type),
    )
