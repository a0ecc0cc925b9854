"""Plan → live objects. Decides nothing: every choice is already in the plan, and the objects
are checked against it before anyone uses them."""

from __future__ import annotations

from dataclasses import dataclass

from ddpkit._runtime.launch import Launcher, make_launcher
from ddpkit.accelerators import Accelerator, CPUAccelerator, GPUAccelerator
from ddpkit.connector._plan import Plan
from ddpkit.connector._probe import Probe
from ddpkit.connector._rules import built_environment
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments import ClusterEnvironment
from ddpkit.plugins.precision import DoublePrecisionPlugin, MixedPrecisionPlugin, PrecisionPlugin
from ddpkit.plugins.training_type import (
    DDPPlugin,
    DDPSpawnPlugin,
    SingleDevicePlugin,
    TrainingTypePlugin,
)
from ddpkit.plugins.training_type._base import Connection

_ACCELERATORS: dict[str, type[Accelerator]] = {"cpu": CPUAccelerator, "gpu": GPUAccelerator}


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


def _training_type(plan: Plan, first_device: object) -> TrainingTypePlugin:
    instance: TrainingTypePlugin | None = plan.training_type_instance
    if instance is not None:
        return instance.unconnected_copy() if plan.copies_instance else instance
    kind = plan.training_type.value
    if kind == "single_device":
        return SingleDevicePlugin(first_device)  # type: ignore[arg-type]
    if kind == "ddp_spawn":
        return DDPSpawnPlugin(**plan.training_type_options)
    return DDPPlugin(**plan.training_type_options)


def build(plan: Plan, probe: Probe) -> Built:
    accelerator = plan.accelerator_instance or _ACCELERATORS[plan.accelerator.value]()
    environment = plan.environment_instance or built_environment(plan.environment.value, probe)
    precision = plan.precision_instance or _precision(plan.precision.value)
    precision.setup(accelerator.device_type)
    devices = tuple(accelerator.device(i) for i in plan.devices.value)
    training_type = _training_type(plan, devices[0])
    training_type.connect(
        Connection(
            accelerator=accelerator,
            precision_plugin=precision,
            cluster_environment=environment,
            parallel_devices=devices,
            num_nodes=plan.num_nodes.value,
            sync_batchnorm=plan.sync_batchnorm.value,
            backend=plan.backend.value,
        )
    )
    built = Built(
        accelerator=accelerator,
        training_type=training_type,
        precision_plugin=precision,
        cluster_environment=environment,
        launcher=make_launcher(plan.launcher.value, training_type),
    )
    wrong = disagreements(plan, built)
    if wrong:
        # Only a user's subclass that overrides what the plan decided can get here.
        raise MisconfigurationError(
            f"{plan.call}: the objects disagree with the plan: {'; '.join(wrong)}. Fix: do not "
            f"override these in your subclass of {type(training_type).__name__}, or pass the "
            f"flags that give them."
        )
    return built


def disagreements(plan: Plan, built: Built) -> list[str]:
    """Where the live objects differ from the plan (nothing, after :func:`build`)."""
    tt = built.training_type
    try:
        world_size: object = tt.world_size
    except (NotImplementedError, TypeError, ValueError):  # a 1.x environment told at set-up
        world_size = plan.world_size
    found = [
        (name, want, got)
        for name, want, got in (
            ("world_size", plan.world_size, world_size),
            ("processes per node", plan.num_processes, tt.num_processes),
            ("num_nodes", plan.num_nodes.value, tt.num_nodes),
            (
                "devices",
                [built.accelerator.device(i) for i in plan.devices.value],
                tt.parallel_devices,
            ),
            ("training type", plan.training_type.value, tt.name),
            ("precision", plan.precision.value, built.precision_plugin.precision),
            ("sync_batchnorm", plan.sync_batchnorm.value, tt.sync_batchnorm),
            ("environment", plan.environment_instance or plan.environment.value, _env(built)),
            ("launcher", plan.launcher.value, built.launcher.name if built.launcher else "-"),
        )
        if not _same(name, want, got)
    ]
    for key, value in plan.training_type_options.items():
        if getattr(tt, key, value) != value:
            found.append((key, value, getattr(tt, key)))
    return [f"{name}: plan {want!r}, objects {got!r}" for name, want, got in found]


def _env(built: Built) -> object:
    env = built.training_type.cluster_environment
    return env if env is built.cluster_environment else f"two environments: {env!r}"


def _same(name: str, want: object, got: object) -> bool:
    if name == "environment":
        return got is want or (isinstance(want, str) and getattr(got, "name", None) == want)
    if name == "launcher":
        return got == want or (want in ("none", "external") and got == "-")
    return got == want
