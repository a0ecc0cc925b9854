"""What the user wrote, and its translation into one word per axis.

Legacy spellings are translated here, once: ``accelerator="ddp_cpu"`` becomes accelerator "cpu"
plus the training type "ddp_spawn" (the old default), ``gpus=2`` becomes accelerator "gpu" with a
request for two devices, and so on. Everything after this module speaks only the modern axes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.errors import MisconfigurationError

__all__ = ["DeviceRequest", "Flags", "Request", "parse_device_spelling", "translate"]

#: Names users may pass as ``accelerator=`` and what ddpkit does with each.
ACCELERATOR_NAMES = ("auto", "cpu", "cuda", "gpu")
#: Legacy accelerator strings: (accelerator, training type). ``None`` = decided by other flags;
#: "ddp_cpu" leaves the training type open: its old default (spawn) is what is ambiguous.
LEGACY_ACCELERATORS: dict[str, tuple[str | None, str | None]] = {
    "ddp_cpu": ("cpu", None),
    "ddp_cpu_spawn": ("cpu", "ddp_spawn"),
    "ddp": (None, "ddp"),
    "ddp_spawn": (None, "ddp_spawn"),
}
#: Names that other trainers accept and ddpkit deliberately does not.
UNSUPPORTED = {
    "dp": "DataParallel is slower than DDP even on one machine; use strategy='ddp'",
    "ddp2": "ddp2 was removed from Lightning too; use strategy='ddp'",
    "horovod": "use strategy='ddp' (or launch with torchrun)",
    "tpu": "ddpkit runs on CPUs and CUDA GPUs only",
    "ipu": "ddpkit runs on CPUs and CUDA GPUs only",
    "hpu": "ddpkit runs on CPUs and CUDA GPUs only",
    "mps": "ddpkit runs on CPUs and CUDA GPUs only",
    "xla": "ddpkit runs on CPUs and CUDA GPUs only",
    "deepspeed": "ddpkit does not wrap DeepSpeed; use strategy='ddp'",
    "fsdp": "ddpkit does not wrap FSDP yet; use strategy='ddp'",
}
PRECISIONS = {
    "32": "32-true",
    "32-true": "32-true",
    "64": "64-true",
    "64-true": "64-true",
    "double": "64-true",
    "16": "16-mixed",
    "16-mixed": "16-mixed",
    "bf16": "bf16-mixed",
    "bf16-mixed": "bf16-mixed",
}


@dataclass(frozen=True, kw_only=True)
class Flags:
    """The device and training flags exactly as passed to ``Trainer(...)``."""

    accelerator: Any = None
    """A name (``"cpu"``, ``"gpu"``, ``"auto"``, legacy ``"ddp_cpu"`` ...) or an Accelerator."""
    strategy: Any = None
    """A training-type name from the registry, or a TrainingTypePlugin instance."""
    devices: int | str | tuple[int, ...] | None = None
    """How many devices per node, or which: ``2``, ``[0, 1]``, ``"0,1"``, ``"auto"``, ``-1``."""
    gpus: int | str | tuple[int, ...] | None = None
    """Legacy: GPUs per node, in the same spellings as ``devices``."""
    num_processes: int | None = None
    """Legacy: CPU processes per node."""
    num_nodes: int = 1
    """Machines in the job."""
    plugins: tuple[Any, ...] = ()
    """Training-type, precision or environment objects, or training-type registry names."""
    precision: int | str = "32-true"
    """32, 64, 16, "bf16" or their "-true" / "-mixed" names."""
    sync_batchnorm: bool = False
    """Convert BatchNorm layers to SyncBatchNorm for DDP."""

    @classmethod
    def of(cls, **kwargs: Any) -> Flags:
        """Build from Trainer keyword arguments; lists become tuples so the flags stay frozen."""
        for key in ("devices", "gpus"):
            if isinstance(kwargs.get(key), list):
                kwargs[key] = tuple(kwargs[key])
        plugins = kwargs.get("plugins")
        if plugins is None:
            kwargs["plugins"] = ()
        elif isinstance(plugins, list | tuple):
            kwargs["plugins"] = tuple(plugins)
        else:
            kwargs["plugins"] = (plugins,)
        return cls(**kwargs)

    def call(self) -> str:
        """The flags as a ``Trainer(...)`` call, for messages: only what the user set."""
        parts = []
        for name in ("accelerator", "strategy", "devices", "gpus", "num_processes"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={_show(value)}")
        if self.num_nodes != 1:
            parts.append(f"num_nodes={self.num_nodes}")
        if self.plugins:
            parts.append(f"plugins=[{', '.join(_show(p) for p in self.plugins)}]")
        if self.precision not in ("32-true", 32, "32"):
            parts.append(f"precision={_show(self.precision)}")
        if self.sync_batchnorm:
            parts.append("sync_batchnorm=True")
        return f"Trainer({', '.join(parts)})"


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(repr(v) for v in value) + "]"
    return repr(value)


@dataclass(frozen=True)
class DeviceRequest:
    """A device spelling, parsed: ``kind`` is "count", "ids", "all" or "auto"."""

    kind: str
    count: int = 0
    ids: tuple[int, ...] = ()
    source: str = ""

    def same_as(self, other: DeviceRequest) -> bool:
        return (self.kind, self.count, self.ids) == (other.kind, other.count, other.ids)


def parse_device_spelling(flag: str, value: Any) -> DeviceRequest | None:
    """Parse ``devices`` / ``gpus`` in every spelling users write. ``None`` = not given.

    ``2`` → two devices; ``-1``, ``"-1"`` → all; ``[1]``, ``"1,"``, ``"0,1"`` → those ids;
    ``"2"`` → two devices; ``"auto"`` → the accelerator's default; ``0``, ``[]`` → none.
    """
    source = f"{flag}={_show(value)}"
    if value is None:
        return None
    if isinstance(value, bool):
        raise MisconfigurationError(
            f"Trainer({source}): pass a number of devices or a list of ids."
        )
    if isinstance(value, int):
        if value == -1:
            return DeviceRequest("all", source=source)
        if value < 0:
            raise MisconfigurationError(
                f"Trainer({source}): a device count must be ≥ 0, or -1 for all devices."
            )
        return DeviceRequest("count", count=value, source=source)
    if isinstance(value, str):
        text = value.strip()
        if text == "auto":
            return DeviceRequest("auto", source=source)
        if text == "-1":
            return DeviceRequest("all", source=source)
        if "," in text:
            try:
                ids = tuple(int(p) for p in text.split(",") if p.strip())
            except ValueError:
                raise MisconfigurationError(
                    f"Trainer({source}): expected device ids such as '0,1'."
                ) from None
            return _ids(flag, ids, source)
        try:
            count = int(text)
        except ValueError:
            raise MisconfigurationError(
                f"Trainer({source}): expected a count ('2'), ids ('0,1'), '-1' or 'auto'."
            ) from None
        parsed = parse_device_spelling(flag, count)
        assert parsed is not None
        return DeviceRequest(parsed.kind, count=parsed.count, source=source)
    if isinstance(value, Sequence):
        return _ids(flag, tuple(value), source)
    raise MisconfigurationError(
        f"Trainer({source}): expected an int, a list of ids, a string or 'auto'."
    )


def _ids(flag: str, ids: tuple[Any, ...], source: str) -> DeviceRequest:
    if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in ids):
        raise MisconfigurationError(f"Trainer({source}): device ids must be integers ≥ 0.")
    if len(set(ids)) != len(ids):
        raise MisconfigurationError(f"Trainer({source}): a device id appears twice.")
    if not ids:
        return DeviceRequest("count", count=0, source=source)
    return DeviceRequest("ids", ids=ids, count=len(ids), source=source)


@dataclass(frozen=True, kw_only=True)
class Request:
    """The flags on the modern axes. ``*_source`` say which flag produced each value."""

    flags: Flags
    accelerator: str  # "auto", "cpu" or "gpu"
    accelerator_source: str
    accelerator_instance: Any
    training_type: str | None  # registry kind, or None = decide from the device count
    training_type_options: dict[str, Any]
    training_type_source: str
    training_type_instance: Any
    legacy_default_spawn: bool  # legacy device flags: several devices meant spawn in 1.x
    devices: DeviceRequest | None
    unused_gpus: DeviceRequest | None  # gpus given with a CPU accelerator
    environment_instance: Any
    precision: str
    precision_source: str
    precision_instance: Any
    legacy_words: tuple[str, ...]  # training types in the accelerator slot, for the warning


def translate(flags: Flags) -> Request:
    """Map the user's flags onto the modern axes. Raises on contradictions between flags."""
    from ddpkit.accelerators.base import Accelerator
    from ddpkit.plugins.environments.base import ClusterEnvironment
    from ddpkit.plugins.precision.base import PrecisionPlugin
    from ddpkit.plugins.training_type.base import TrainingTypePlugin
    from ddpkit.plugins.training_type.registry import TRAINING_TYPES

    call = flags.call()
    legacy: list[str] = []

    # -- accelerator --------------------------------------------------------------------------
    acc_instance = None
    legacy_tt: str | None = None
    acc = flags.accelerator
    if isinstance(acc, Accelerator):
        acc_instance, accelerator, acc_source = acc, acc.name, f"accelerator={acc!r}"
    elif acc is None:
        accelerator, acc_source = "auto", "default"
    elif isinstance(acc, str):
        name = acc.lower()
        acc_source = f"accelerator={acc!r}"
        if name in UNSUPPORTED:
            raise MisconfigurationError(
                f"{call}: accelerator={acc!r} is not supported: {UNSUPPORTED[name]}. "
                f"ddpkit supports accelerator= {_choices(ACCELERATOR_NAMES)} (legacy: "
                f"{_choices(LEGACY_ACCELERATORS)})."
            )
        if name in LEGACY_ACCELERATORS:
            mapped, legacy_tt = LEGACY_ACCELERATORS[name]
            accelerator = mapped or "auto"
            if legacy_tt is not None:  # a training type in the accelerator slot
                legacy.append(f"accelerator={acc!r}")
        elif name in ACCELERATOR_NAMES:
            accelerator = "gpu" if name == "cuda" else name
        else:
            raise MisconfigurationError(
                f"{call}: unknown accelerator={acc!r}. Choose one of "
                f"{_choices(ACCELERATOR_NAMES)} (legacy: {_choices(LEGACY_ACCELERATORS)})."
            )
    else:
        raise MisconfigurationError(
            f"{call}: accelerator must be a name or an Accelerator, not {type(acc).__name__}."
        )

    # -- plugins= : sort the objects by axis --------------------------------------------------
    tt_candidates: list[tuple[str, Any]] = []  # (source, instance-or-registry-name)
    env_instance = None
    precision_instance = None
    for plugin in flags.plugins:
        if isinstance(plugin, TrainingTypePlugin):
            tt_candidates.append((f"plugins=[{plugin!r}]", plugin))
        elif isinstance(plugin, str):
            if plugin not in TRAINING_TYPES:
                _unknown_training_type(call, f"plugins=[{plugin!r}]", plugin)
            tt_candidates.append((f"plugins=[{plugin!r}]", plugin))
        elif isinstance(plugin, ClusterEnvironment):
            if env_instance is not None:
                raise MisconfigurationError(
                    f"{call}: two cluster environments, {env_instance!r} and {plugin!r}. "
                    f"Fix: pass one."
                )
            env_instance = plugin
        elif isinstance(plugin, PrecisionPlugin):
            if precision_instance is not None:
                raise MisconfigurationError(
                    f"{call}: two precision plugins, {precision_instance!r} and {plugin!r}. "
                    f"Fix: pass one."
                )
            precision_instance = plugin
        else:
            raise MisconfigurationError(
                f"{call}: plugins=[{plugin!r}] is not a training type, cluster environment, "
                f"precision plugin or training-type name."
            )
    if flags.strategy is not None:
        strat = flags.strategy
        if isinstance(strat, TrainingTypePlugin):
            tt_candidates.insert(0, (f"strategy={strat!r}", strat))
        elif isinstance(strat, str):
            if strat.lower() in UNSUPPORTED:
                raise MisconfigurationError(
                    f"{call}: strategy={strat!r} is not supported: {UNSUPPORTED[strat.lower()]}. "
                    f"Choose one of {_choices(TRAINING_TYPES)}."
                )
            if strat != "auto":
                if strat not in TRAINING_TYPES:
                    _unknown_training_type(call, f"strategy={strat!r}", strat)
                tt_candidates.insert(0, (f"strategy={strat!r}", strat))
        else:
            raise MisconfigurationError(
                f"{call}: strategy must be a name or a TrainingTypePlugin, "
                f"not {type(strat).__name__}."
            )
    if len(tt_candidates) > 1:
        (first, _), (second, _) = tt_candidates[:2]
        raise MisconfigurationError(
            f"{call}: two training types were given, {first} and {second}. "
            f"Fix: pass exactly one (as strategy=...)."
        )

    tt_instance = None
    tt_options: dict[str, Any] = {}
    if tt_candidates:
        tt_source, chosen = tt_candidates[0]
        if isinstance(chosen, str):
            entry = TRAINING_TYPES[chosen]
            training_type: str | None = entry.kind
            tt_options = dict(entry.options)
        else:
            tt_instance = chosen
            training_type = chosen.name
        # A legacy accelerator word may come with a plugin of the same kind (common in 1.x:
        # accelerator="ddp", plugins=[DDPPlugin(...)]); "ddp_cpu" only ever meant "several CPU
        # processes", so any training type refines it.
        if legacy_tt is not None and legacy_tt != training_type:
            raise MisconfigurationError(
                f"{call}: accelerator={acc!r} asks for {legacy_tt!r}, but {tt_source} is "
                f"{training_type!r}. Fix: pass accelerator='cpu' or 'gpu' and keep {tt_source}."
            )
    else:
        training_type, tt_source = legacy_tt, (f"accelerator={acc!r}" if legacy_tt else "")

    # -- devices ------------------------------------------------------------------------------
    devices = parse_device_spelling("devices", flags.devices)
    gpus = parse_device_spelling("gpus", flags.gpus)
    if flags.num_processes is not None and (
        isinstance(flags.num_processes, bool)
        or not isinstance(flags.num_processes, int)
        or flags.num_processes < 1
    ):
        raise MisconfigurationError(
            f"{call}: num_processes={flags.num_processes!r} must be an int ≥ 1."
        )
    nproc = (
        DeviceRequest(
            "count", count=flags.num_processes, source=f"num_processes={flags.num_processes}"
        )
        if flags.num_processes is not None
        else None
    )
    unused_gpus = None
    if gpus is not None and gpus.kind == "count" and gpus.count == 0:
        gpus = None  # gpus=0 / [] meant "no GPU" in 1.x
    if gpus is not None and accelerator == "cpu":
        unused_gpus, gpus = gpus, None
    if gpus is not None and accelerator == "auto":
        accelerator, acc_source = "gpu", gpus.source
    if nproc is not None and accelerator == "auto":
        accelerator, acc_source = "cpu", nproc.source
    legacy_count = gpus if accelerator == "gpu" else nproc
    if accelerator == "gpu" and nproc is not None and nproc.count > 1:
        raise MisconfigurationError(
            f"{call}: {nproc.source} counts CPU processes, but the accelerator is GPU "
            f"({acc_source}). Fix: drop num_processes and pass devices=<GPUs per node>."
        )
    if devices is not None and legacy_count is not None and not devices.same_as(legacy_count):
        raise MisconfigurationError(
            f"{call}: {devices.source} and {legacy_count.source} disagree. "
            f"Fix: pass only {devices.source}."
        )
    if devices is None and legacy_count is not None:
        devices = legacy_count
    # 1.x chose spawn for several devices asked for with the legacy flags; that default is the
    # ambiguous one (it will become subprocess DDP), so the rules warn when it applies.
    legacy_default_spawn = training_type is None and (
        acc == "ddp_cpu" or (flags.devices is None and legacy_count is not None)
    )

    # -- precision ----------------------------------------------------------------------------
    precision_key = str(flags.precision).lower()
    if precision_key not in PRECISIONS:
        raise MisconfigurationError(
            f"{call}: precision={flags.precision!r} is not supported. Choose one of "
            f"{_choices(sorted(set(PRECISIONS.values())))}."
        )
    precision = PRECISIONS[precision_key]
    precision_source = (
        "default" if flags.precision == "32-true" else f"precision={flags.precision!r}"
    )
    if precision_instance is not None:
        if precision_source != "default" and precision != precision_instance.precision:
            raise MisconfigurationError(
                f"{call}: precision={flags.precision!r} and plugins=[{precision_instance!r}] "
                f"disagree. Fix: pass one of them."
            )
        precision = precision_instance.precision
        precision_source = f"plugins=[{precision_instance!r}]"

    return Request(
        flags=flags,
        accelerator=accelerator,
        accelerator_source=acc_source,
        accelerator_instance=acc_instance,
        training_type=training_type,
        training_type_options=tt_options,
        training_type_source=tt_source,
        training_type_instance=tt_instance,
        legacy_default_spawn=legacy_default_spawn,
        devices=devices,
        unused_gpus=unused_gpus,
        environment_instance=env_instance,
        precision=precision,
        precision_source=precision_source,
        precision_instance=precision_instance,
        legacy_words=tuple(legacy),
    )


def _choices(names: Any) -> str:
    return ", ".join(repr(n) for n in sorted(names))


def _unknown_training_type(call: str, source: str, name: str) -> None:
    from ddpkit.plugins.training_type.registry import TRAINING_TYPES

    raise MisconfigurationError(
        f"{call}: {source} is not a training type ddpkit knows. "
        f"Choose one of {_choices(TRAINING_TYPES)}."
    )
