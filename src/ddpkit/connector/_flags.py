"""What the user wrote: the device and training flags of ``Trainer(...)``, and the call as
written (for messages). Translating them onto the axes of a plan is :mod:`ddpkit.connector
.translate`'s job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpkit.utilities._reprs import safe_repr

#: the Trainer keywords the connector resolves, in the order messages show them: the order
#: users write them in (``accelerator="ddp_cpu", num_processes=2, plugins=[...]``,
#: ``accelerator="cpu", devices=2, strategy="ddp"``)
DEVICE_FLAGS = (
    "accelerator",
    "devices",
    "gpus",
    "num_processes",
    "num_nodes",
    "strategy",
    "plugins",
    "precision",
    "sync_batchnorm",
)
# Values that mean "not given": the Trainer's defaults (exactly these, type included).
_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "num_nodes": (1,),
    "precision": ("32-true",),
    "sync_batchnorm": (False,),
    "plugins": ((), []),
}


def is_given(name: str, value: Any) -> bool:
    """False for None and for the Trainer's own default of ``name`` (the user wrote nothing)."""
    if value is None:
        return False
    return not any(type(value) is type(d) and value == d for d in _DEFAULTS.get(name, ()))


def format_call(values: Mapping[str, Any]) -> str:
    """``Trainer(accelerator='ddp_cpu', num_processes=2)``: the flags the user gave, each as
    written (``repr``), in :data:`DEVICE_FLAGS` order."""
    parts = [
        f"{name}={safe_repr(values[name])}"
        for name in DEVICE_FLAGS
        if is_given(name, values.get(name))
    ]
    return f"Trainer({', '.join(parts)})"


@dataclass(frozen=True, kw_only=True)
class Flags:
    """The device and training flags exactly as passed to ``Trainer(...)``; None = not given.
    Nothing is checked here: :func:`ddpkit.connector._translate.translate` checks every value and
    raises with :attr:`call`."""

    accelerator: Any = None
    """A name (``"cpu"``, ``"gpu"``, ``"auto"``, legacy ``"ddp_cpu"`` ...) or an Accelerator."""
    strategy: Any = None
    """A training-type name from the registry, or a TrainingTypePlugin instance."""
    devices: Any = None
    """How many devices per node, or which: ``2``, ``[0, 1]``, ``"0,1"``, ``"auto"``, ``-1``."""
    gpus: Any = None
    """Legacy: GPUs per node, in the same spellings as ``devices``."""
    num_processes: Any = None
    """Legacy: CPU processes per node."""
    num_nodes: Any = None
    """Machines in the job (default 1)."""
    plugins: tuple[Any, ...] = ()
    """Training-type, precision or environment objects, or training-type registry names."""
    precision: Any = None
    """32, 64, 16, "bf16" or their "-true" / "-mixed" names (default "32-true")."""
    sync_batchnorm: Any = None
    """Convert BatchNorm layers to SyncBatchNorm for DDP (default False)."""
    quoted: str = field(default="", compare=False)
    """The call as the user wrote it, for messages (computed when not given)."""

    def __post_init__(self) -> None:
        if not self.quoted:
            object.__setattr__(self, "quoted", format_call(self.__dict__))

    def call(self) -> str:
        """The flags as the user's ``Trainer(...)`` call, for messages: only what was given."""
        return self.quoted

    @classmethod
    def of(cls, **kwargs: Any) -> Flags:
        """Build from Trainer keyword arguments: the call is quoted as written, then lists
        become tuples so that the flags stay frozen."""
        unknown = sorted(set(kwargs) - set(DEVICE_FLAGS))
        if unknown:
            raise TypeError(f"Flags.of() got unknown flags {', '.join(unknown)}")
        call = format_call(kwargs)
        values = dict(kwargs)
        for key in ("devices", "gpus"):
            if isinstance(values.get(key), list):
                values[key] = tuple(values[key])
        plugins = values.get("plugins")
        if plugins is None:
            values["plugins"] = ()
        elif isinstance(plugins, list | tuple):
            values["plugins"] = tuple(plugins)
        else:
            values["plugins"] = (plugins,)
        return cls(**values, quoted=call)
