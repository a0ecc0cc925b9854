"""The user's flags, translated once onto the modern axes, in named steps.

Legacy spellings are translated here: ``accelerator="ddp_cpu"`` becomes accelerator "cpu" plus a
request for DDP whose launcher the rules decide (spawn, 1.x's default, is the ambiguous part),
``gpus=2`` becomes accelerator "gpu" with two devices, and so on. The fields a user set on a
training-type instance (``parallel_devices``, ``num_nodes``, ``cluster_environment``,
``sync_batchnorm``) count as flags: they fill what the flags left unset, and contradict them
loudly. Every value is checked here and refused with the call as written and a fix; everything
after this module speaks only the modern axes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddpkit._flag_names import ACCELERATOR_NAMES, LEGACY_ACCELERATORS, PRECISIONS
from ddpkit.accelerators._base import Accelerator
from ddpkit.connector._devices import DeviceRequest, parse_device_spelling
from ddpkit.connector._flags import Flags, is_given
from ddpkit.connector._translate_plugins import (
    UNSUPPORTED,
    Sorted,
    sort_plugins,
    training_type_from,
)
from ddpkit.connector._types import MAX_PROCESSES_PER_NODE, MAX_WORLD_SIZE
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.utilities._reprs import safe_repr
from ddpkit.utilities._suggest import choices, did_you_mean


@dataclass(frozen=True, kw_only=True)
class Request:
    """The flags on the modern axes. ``*_source`` say which flag produced each value."""

    flags: Flags
    call: str
    accelerator: str  # "auto", "cpu" or "gpu"
    accelerator_source: str
    accelerator_instance: Accelerator | None
    is_ddp_cpu: bool  # accelerator="ddp_cpu": DDP on CPU, launcher decided by the rules
    training_type: str | None  # a kind, or None = decide from the device count
    training_type_options: dict[str, Any]
    training_type_source: str
    training_type_instance: TrainingTypePlugin | None
    #: the training type comes from a 1.x spelling, so 1.x's defaults apply
    #: (find_unused_parameters=True)
    legacy_semantics: bool
    legacy_default_spawn: bool  # legacy device flags: several devices meant spawn in 1.x
    devices: DeviceRequest | None
    unused_gpus: DeviceRequest | None  # gpus given with a CPU accelerator
    #: devices given beside a 1.x device count that says otherwise (1.6: the count wins)
    ignored_devices: DeviceRequest | None
    num_nodes: int | None
    num_nodes_source: str
    environment_instance: ClusterEnvironment | None
    environment_source: str
    precision: str
    precision_source: str
    precision_instance: PrecisionPlugin | None
    sync_batchnorm: bool
    sync_batchnorm_source: str
    legacy_words: tuple[str, ...] = field(default=())  # training types in the accelerator slot


@dataclass(frozen=True)
class _Accelerator:
    name: str
    source: str
    instance: Accelerator | None = None
    legacy_tt: str | None = None
    is_ddp_cpu: bool = False
    legacy_word: str | None = None


def _accelerator(call: str, value: Any) -> _Accelerator:
    if isinstance(value, Accelerator):
        name = getattr(type(value), "name", None)
        if name not in ("cpu", "gpu"):
            raise MisconfigurationError(
                f"{call}: accelerator={safe_repr(value)} is an Accelerator ddpkit cannot run: "
                "ddpkit runs "
                f"on CPUs and CUDA GPUs. Fix: subclass CPUAccelerator or GPUAccelerator."
            )
        return _Accelerator(str(name), f"accelerator={safe_repr(value)}", instance=value)
    if value is None:
        return _Accelerator("auto", "default")
    if not isinstance(value, str):
        raise MisconfigurationError(
            f"{call}: accelerator must be a name or an Accelerator, not {type(value).__name__}. "
            f"Choose one of {choices(ACCELERATOR_NAMES)}."
        )
    name, source = value.strip().lower(), f"accelerator={safe_repr(value)}"
    if name in UNSUPPORTED:
        raise MisconfigurationError(
            f"{call}: accelerator={safe_repr(value)} is not supported: {UNSUPPORTED[name]}. "
            "Choose one "
            f"of {choices(ACCELERATOR_NAMES)} (legacy: {choices(LEGACY_ACCELERATORS)})."
        )
    if name in LEGACY_ACCELERATORS:
        mapped, legacy_tt = LEGACY_ACCELERATORS[name]
        word = source if legacy_tt is not None else None  # a training type in the wrong slot
        return _Accelerator(mapped or "auto", source, None, legacy_tt, name == "ddp_cpu", word)
    if name in ACCELERATOR_NAMES:
        return _Accelerator("gpu" if name == "cuda" else name, source)
    known = (*ACCELERATOR_NAMES, *LEGACY_ACCELERATORS)
    raise MisconfigurationError(
        f"{call}: unknown accelerator={safe_repr(value)}{did_you_mean(value, known)}. Choose one "
        "of "
        f"{choices(ACCELERATOR_NAMES)} (legacy: {choices(LEGACY_ACCELERATORS)})."
    )


def _count_flag(call: str, name: str, value: Any, limit: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise MisconfigurationError(
            f"{call}: {name}={safe_repr(value)} must be an int from 1 to {limit}. Fix: {name}=2."
        )
    return value


def _plugin_devices(call: str, instance: TrainingTypePlugin | None, source: str) -> Any:
    """The devices a training-type instance names, as a device request."""
    given = instance.given.parallel_devices if instance is not None else None
    if given is None:
        return None
    shown = f"{source}.parallel_devices"
    if given[0].type == "cpu":
        return DeviceRequest("count", count=len(given), source=shown)
    if any(d.index is None for d in given):
        raise MisconfigurationError(
            f"{call}: {shown} names a GPU without its index. Fix: name each, e.g. "
            f"[torch.device('cuda', 0), torch.device('cuda', 1)]."
        )
    ids = tuple(int(d.index) for d in given if d.index is not None)
    return DeviceRequest("ids", count=len(ids), ids=ids, source=shown)


def _devices(call: str, flags: Flags, acc: _Accelerator, tt: Any) -> tuple[Any, ...]:
    """(accelerator name, its source, devices, unused gpus, legacy count given, devices that
    a legacy count overrides)."""
    devices = parse_device_spelling(call, "devices", flags.devices)
    gpus = parse_device_spelling(call, "gpus", flags.gpus)
    nproc_count = _count_flag(call, "num_processes", flags.num_processes, MAX_PROCESSES_PER_NODE)
    nproc = (
        DeviceRequest(
            "count", count=nproc_count, source=f"num_processes={safe_repr(flags.num_processes)}"
        )
        if nproc_count is not None
        else None
    )
    accelerator, acc_source = acc.name, acc.source
    unused = None
    if gpus is not None and gpus.kind == "count" and gpus.count == 0:
        gpus = None  # gpus=0 / [] meant "no GPU" in 1.x
    if gpus is not None and accelerator == "cpu":
        unused, gpus = gpus, None
    if gpus is not None and accelerator == "auto":
        accelerator, acc_source = "gpu", gpus.source
    if nproc is not None and accelerator == "auto":
        accelerator, acc_source = "cpu", nproc.source
    legacy = gpus if accelerator == "gpu" else nproc
    if accelerator == "gpu" and nproc is not None and nproc.count > 1:
        raise MisconfigurationError(
            f"{call}: {nproc.source} counts CPU processes, but the accelerator is GPU "
            f"({acc_source}). Fix: drop num_processes and pass devices=<GPUs per node>."
        )
    ignored = None
    if devices is not None and legacy is not None and not devices.same_as(legacy):
        # Lightning 1.6 ran the device-specific flag and warned that devices was ignored (a
        # script's parser default devices=1 beside --num_processes 2 is 1.x code that ran).
        ignored, devices = devices, None
    for other in (legacy, tt):
        if devices is not None and other is not None and not devices.same_as(other):
            raise MisconfigurationError(
                f"{call}: {devices.source} and {other.source} disagree. Fix: pass only one of them."
            )
        devices = devices or other
    return accelerator, acc_source, devices, unused, legacy is not None, ignored


def _flag_or_plugin(
    call: str, field: str, given: Any, shown: str, from_plugin: Any, owner: str
) -> tuple[Any, str]:
    """A flag the training-type plugin may carry too (``owner``: the plugin as the call wrote
    it): the two must agree; the flag (as written, ``shown``) wins, then the plugin's value,
    else None and the default."""
    if given is not None and from_plugin is not None and given != from_plugin:
        raise MisconfigurationError(
            f"{call}: {field}={given} and {owner}'s {field}={from_plugin} disagree. Fix: pass "
            f"only one of them."
        )
    if given is not None:
        return given, f"{field}={shown}"
    if from_plugin is not None:
        return from_plugin, f"{owner}.{field}"
    return None, "default"


def _num_nodes(call: str, flags: Flags, instance: TrainingTypePlugin | None, source: str) -> Any:
    raw = flags.num_nodes if is_given("num_nodes", flags.num_nodes) else None
    given = _count_flag(call, "num_nodes", raw, MAX_WORLD_SIZE)
    from_plugin = instance.given.num_nodes if instance is not None else None
    return _flag_or_plugin(
        call, "num_nodes", given, safe_repr(flags.num_nodes), from_plugin, source
    )


def _precision(call: str, flags: Flags, instance: PrecisionPlugin | None) -> tuple[str, str]:
    value = flags.precision
    if not is_given("precision", value):
        precision, source = "32-true", "default"
    else:
        key = str(value).strip().lower() if isinstance(value, str | int) else None
        if isinstance(value, bool) or key not in PRECISIONS:
            shown = sorted(set(PRECISIONS.values()))
            raise MisconfigurationError(
                f"{call}: precision={safe_repr(value)} is not supported"
                f"{did_you_mean(str(value), PRECISIONS)}. Choose one of {choices(shown)}."
            )
        precision, source = PRECISIONS[key], f"precision={safe_repr(value)}"
    if instance is None:
        return precision, source
    if source != "default" and precision != instance.precision:
        raise MisconfigurationError(
            f"{call}: precision={safe_repr(value)} and plugins=[{safe_repr(instance)}] disagree. "
            "Fix: pass one "
            f"of them."
        )
    return instance.precision, f"plugins=[{safe_repr(instance)}]"


def _sync_batchnorm(call: str, flags: Flags, instance: TrainingTypePlugin | None) -> Any:
    value = flags.sync_batchnorm
    if value is not None and not isinstance(value, bool):
        raise MisconfigurationError(
            f"{call}: sync_batchnorm={safe_repr(value)} must be True or False. Fix: "
            "sync_batchnorm=True."
        )
    from_plugin = instance.given.sync_batchnorm if instance is not None else None
    # False asks for nothing: the plugin's own value stands.
    given = True if value is True else None
    chosen, reason = _flag_or_plugin(
        call, "sync_batchnorm", given, "True", from_plugin, safe_repr(instance)
    )
    return bool(chosen), reason


def _environment(call: str, plugins: Sorted, tt: TrainingTypePlugin | None, source: str) -> Any:
    from_plugin = tt.given.cluster_environment if tt is not None else None
    given = plugins.environment
    if given is not None and from_plugin is not None and given is not from_plugin:
        raise MisconfigurationError(
            f"{call}: plugins=[{safe_repr(given)}] and {source}'s "
            f"cluster_environment={safe_repr(from_plugin)} "
            f"are two environments. Fix: pass one of them."
        )
    if given is not None:
        return given, f"plugins=[{safe_repr(given)}]"
    if from_plugin is not None:
        return from_plugin, f"{source}.cluster_environment"
    return None, ""


def translate(flags: Flags) -> Request:
    """Map the user's flags onto the modern axes. Raises on a value that cannot work and on
    contradictions between flags, quoting the call as written."""
    call = flags.call()
    acc = _accelerator(call, flags.accelerator)
    plugins = sort_plugins(call, flags, acc.instance)
    tt = training_type_from(call, plugins, acc.legacy_tt, acc.source)
    instance = tt.instance
    accelerator, acc_source, devices, unused, legacy_count, ignored = _devices(
        call, flags, acc, _plugin_devices(call, instance, tt.source)
    )
    num_nodes, nodes_source = _num_nodes(call, flags, instance, tt.source)
    environment, env_source = _environment(call, plugins, instance, tt.source)
    precision, precision_source = _precision(call, flags, plugins.precision)
    sync_bn, sync_bn_source = _sync_batchnorm(call, flags, instance)
    legacy_spelling = acc.legacy_tt is not None or acc.is_ddp_cpu or tt.from_plugins_string
    # 1.x chose spawn for several devices asked for with the legacy flags; that default is the
    # ambiguous one (it will become subprocess DDP), so the rules warn when it applies.
    legacy_default_spawn = tt.kind is None and (
        acc.is_ddp_cpu or (flags.devices is None and legacy_count and instance is None)
    )
    return Request(
        flags=flags,
        call=call,
        accelerator=accelerator,
        accelerator_source=acc_source,
        accelerator_instance=acc.instance,
        is_ddp_cpu=acc.is_ddp_cpu,
        training_type=tt.kind,
        training_type_options=dict(tt.options),
        training_type_source=tt.source,
        training_type_instance=instance,
        legacy_semantics=legacy_spelling or (tt.kind is None and legacy_count),
        legacy_default_spawn=bool(legacy_default_spawn),
        devices=devices,
        unused_gpus=unused,
        ignored_devices=ignored,
        num_nodes=num_nodes,
        num_nodes_source=nodes_source,
        environment_instance=environment,
        environment_source=env_source,
        precision=precision,
        precision_source=precision_source,
        precision_instance=plugins.precision,
        sync_batchnorm=sync_bn,
        sync_batchnorm_source=sync_bn_source,
        legacy_words=(acc.legacy_word,) if acc.legacy_word else (),
    )
