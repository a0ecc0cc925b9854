"""The objects and names in ``plugins=[...]`` and ``strategy=``, sorted by axis, and the one
training type they name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddpkit._flag_names import TRAINING_TYPES
from ddpkit.accelerators._base import Accelerator
from ddpkit.connector._flags import Flags
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.plugins.training_type.ddp import DDPPlugin
from ddpkit.plugins.training_type.ddp_spawn import DDPSpawnPlugin
from ddpkit.plugins.training_type.single_device import SingleDevicePlugin
from ddpkit.utilities._reprs import safe_repr
from ddpkit.utilities._suggest import choices, did_you_mean

_KNOWN_PRECISIONS = ("16-mixed", "32-true", "64-true", "bf16-mixed")
#: Names that other trainers accept and ddpkit deliberately does not.
UNSUPPORTED = {
    "dp": "DataParallel is slower than DDP even on one machine; use strategy='ddp'",
    "ddp2": "ddp2 was removed from Lightning too; use strategy='ddp'",
    "horovod": "use strategy='ddp' (or launch with torchrun)",
    **dict.fromkeys(("tpu", "ipu", "hpu", "mps", "xla"), "ddpkit runs on CPUs and CUDA GPUs only"),
    "deepspeed": "ddpkit does not wrap DeepSpeed; use strategy='ddp'",
    "fsdp": "ddpkit does not wrap FSDP yet; use strategy='ddp'",
}
_SHARDED = "ddpkit does not wrap sharded training; use strategy='ddp'"
_UNSUPPORTED_STRATEGIES = {
    **UNSUPPORTED,
    **dict.fromkeys(
        ("ddp_sharded", "ddp_sharded_spawn", "ddp_fully_sharded", "fsdp_native"), _SHARDED
    ),
    "ddp_cpu": "ddp_cpu is an accelerator in 1.x, not a strategy; use accelerator='cpu', "
    "strategy='ddp_spawn'",
}


@dataclass
class Sorted:
    """``strategy=`` and ``plugins=[...]`` by axis. ``training_types`` holds (source, instance
    or registry name, from a plugins= string) in the order given, ``strategy=`` first."""

    training_types: list[tuple[str, Any, bool]] = field(default_factory=list)
    environment: ClusterEnvironment | None = None
    precision: PrecisionPlugin | None = None


def _unknown_training_type(call: str, source: str, name: str) -> MisconfigurationError:
    """A name that is no training type of ddpkit's: one another trainer has (a 1.x
    ``plugins="ddp_sharded"``, ``strategy="deepspeed"``) says why ddpkit does not run it."""
    reason = _UNSUPPORTED_STRATEGIES.get(name.lower())
    if reason is not None:
        return MisconfigurationError(
            f"{call}: {source} is not supported: {reason}. Choose one of {choices(TRAINING_TYPES)}."
        )
    return MisconfigurationError(
        f"{call}: {source} is not a training type ddpkit knows"
        f"{did_you_mean(name, TRAINING_TYPES)}. Choose one of {choices(TRAINING_TYPES)}."
    )


def _environment(call: str, plugin: ClusterEnvironment) -> None:
    missing = type(plugin).missing_methods()
    if missing:
        raise MisconfigurationError(
            f"{call}: plugins=[{safe_repr(plugin)}] is a ClusterEnvironment that does not "
            "implement "
            f"{', '.join(missing)}. Fix: implement them (either spelling of each pair), or "
            f"subclass LocalEnvironment, TorchElasticEnvironment or SLURMEnvironment."
        )


def _precision(call: str, plugin: PrecisionPlugin) -> None:
    if plugin.precision not in _KNOWN_PRECISIONS:
        raise MisconfigurationError(
            f"{call}: plugins=[{safe_repr(plugin)}] has precision={safe_repr(plugin.precision)}, "
            "which ddpkit "
            f"does not run. Fix: subclass a precision plugin of {choices(_KNOWN_PRECISIONS)}."
        )


def _only_one(call: str, kind: str, current: Any, new: Any) -> None:
    """``plugins=[...]`` holds at most one plugin of a ``kind`` (the same object twice is one)."""
    if current is not None and current is not new:
        raise MisconfigurationError(
            f"{call}: two {kind}, {safe_repr(current)} and {safe_repr(new)}. Fix: pass one."
        )


def _add(call: str, out: Sorted, plugin: Any, source: str) -> None:
    if isinstance(plugin, TrainingTypePlugin):
        out.training_types.append((source, plugin, False))
    elif isinstance(plugin, str):
        if plugin not in TRAINING_TYPES:
            raise _unknown_training_type(call, source, plugin)
        out.training_types.append((source, plugin, True))
    elif isinstance(plugin, ClusterEnvironment):
        _environment(call, plugin)
        _only_one(call, "cluster environments", out.environment, plugin)
        out.environment = plugin
    elif isinstance(plugin, PrecisionPlugin):
        _precision(call, plugin)
        _only_one(call, "precision plugins", out.precision, plugin)
        out.precision = plugin
    else:
        raise MisconfigurationError(
            f"{call}: {source} is not a training type, cluster environment, precision plugin "
            f"or training-type name. Fix: pass DDPPlugin(...), DDPSpawnPlugin(...), a "
            f"ClusterEnvironment, a PrecisionPlugin, or one of {choices(TRAINING_TYPES)}."
        )


def _strategy(call: str, out: Sorted, strategy: Any) -> None:
    if strategy is None:
        return
    if isinstance(strategy, TrainingTypePlugin):
        out.training_types.insert(0, (f"strategy={safe_repr(strategy)}", strategy, False))
        return
    if not isinstance(strategy, str):
        raise MisconfigurationError(
            f"{call}: strategy must be a name or a TrainingTypePlugin, not "
            f"{type(strategy).__name__}. Choose one of {choices(TRAINING_TYPES)}."
        )
    if strategy == "auto":
        return
    if strategy not in TRAINING_TYPES:
        raise _unknown_training_type(call, f"strategy={safe_repr(strategy)}", strategy)
    out.training_types.insert(0, (f"strategy={safe_repr(strategy)}", strategy, False))


def sort_plugins(call: str, flags: Flags, accelerator: Accelerator | None) -> Sorted:
    """Sort ``plugins=[...]``, ``strategy=`` and a 1.x accelerator's own plugins by axis."""
    out = Sorted()
    for plugin in flags.plugins:
        _add(call, out, plugin, f"plugins=[{safe_repr(plugin)}]")
    if accelerator is not None:
        for attr in ("training_type_plugin", "precision_plugin"):
            carried = getattr(accelerator, attr, None)
            if carried is not None:
                _add(call, out, carried, f"accelerator={safe_repr(accelerator)}.{attr}")
    _strategy(call, out, flags.strategy)
    if len(out.training_types) > 1:
        (first, _, _), (second, _, _) = out.training_types[:2]
        raise MisconfigurationError(
            f"{call}: two training types were given, {first} and {second}. "
            f"Fix: pass exactly one (as strategy=...)."
        )
    return out


@dataclass(frozen=True)
class TrainingTypeAsk:
    """The training type the flags name, if any."""

    kind: str | None
    options: dict[str, Any]
    source: str
    instance: TrainingTypePlugin | None
    from_plugins_string: bool


def _instance_kind(call: str, source: str, instance: TrainingTypePlugin) -> str:
    """The kind a training-type object is launched as, from its class (a DDPPlugin subclass
    re-runs the script, a DDPSpawnPlugin subclass spawns, any other runs in this process); a
    ``name`` that claims another kind is refused (it would be a launch no class implements)."""
    if isinstance(instance, DDPSpawnPlugin):
        kind = "ddp_spawn"
    elif isinstance(instance, DDPPlugin):
        kind = "ddp"
    elif isinstance(instance, SingleDevicePlugin):
        kind = "single_device"
    else:
        kind = "custom"
    if kind == "custom" and instance.name == "single_device":
        return kind  # one process either way
    if instance.name != kind:
        name = type(instance).__name__
        raise MisconfigurationError(
            f"{call}: {source} says name = {safe_repr(instance.name)}, but {name} is a "
            f"{'direct TrainingTypePlugin subclass' if kind == 'custom' else kind + ' class'}, "
            f"which ddpkit runs as {kind!r}: only DDPPlugin subclasses re-run the script for "
            f"their ranks and only DDPSpawnPlugin subclasses spawn them. Fix: subclass DDPPlugin "
            f"(or DDPSpawnPlugin) for DDP, or drop the name attribute from {name}."
        )
    return kind


def training_type_from(
    call: str, plugins: Sorted, legacy_tt: str | None, accelerator_source: str
) -> TrainingTypeAsk:
    """The one training type of ``strategy=`` / ``plugins=[...]`` / a legacy accelerator word."""
    if not plugins.training_types:
        source = accelerator_source if legacy_tt else ""
        return TrainingTypeAsk(legacy_tt, {}, source, None, False)
    source, chosen, from_string = plugins.training_types[0]
    if isinstance(chosen, str):
        entry = TRAINING_TYPES[chosen]
        kind, options, instance = entry.kind, dict(entry.options), None
    else:
        kind, options, instance = _instance_kind(call, source, chosen), {}, chosen
    # A legacy accelerator word may come with a plugin of the same kind (common in 1.x:
    # accelerator="ddp", plugins=[DDPPlugin(...)]); "ddp_cpu" only ever meant "several CPU
    # processes", so any training type refines it.
    if legacy_tt is not None and legacy_tt != kind:
        raise MisconfigurationError(
            f"{call}: {accelerator_source} asks for {safe_repr(legacy_tt)}, but {source} is "
            f"{safe_repr(kind)}. "
            f"Fix: pass accelerator='cpu' or 'gpu' and keep {source}."
        )
    return TrainingTypeAsk(kind, options, source, instance, from_string)
