"""The names a user may spell in ``Trainer(...)`` flags: accelerators (modern and legacy),
precisions and the training-type registry.

A leaf with no imports: the connector resolves with these tables, and the ``ddpkit`` command's
``--help`` lists them without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Names users may pass as ``accelerator=`` and what ddpkit does with each.
ACCELERATOR_NAMES = ("auto", "cpu", "cuda", "gpu")
#: Legacy accelerator strings: (accelerator, training type). ``None`` = decided by other flags;
#: "ddp_cpu" leaves the launcher open: its old default (spawn) is what is ambiguous.
LEGACY_ACCELERATORS: dict[str, tuple[str | None, str | None]] = {
    "ddp_cpu": ("cpu", None),
    "ddp_cpu_spawn": ("cpu", "ddp_spawn"),
    "ddp": (None, "ddp"),
    "ddp_spawn": (None, "ddp_spawn"),
}
#: Every spelling of ``precision=`` and the precision it names.
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


@dataclass(frozen=True)
class TrainingTypeEntry:
    """A registry name: which kind of training type it builds, with which options."""

    #: the plugin's kind: "single_device", "ddp" or "ddp_spawn"
    kind: str
    #: keyword arguments for the plugin's constructor that the name fixes
    options: dict[str, Any] = field(default_factory=dict)


#: Training-type names users may pass as ``strategy="..."`` or in ``plugins=[...]``.
TRAINING_TYPES: dict[str, TrainingTypeEntry] = {
    "single_device": TrainingTypeEntry("single_device"),
    "ddp": TrainingTypeEntry("ddp"),
    "ddp_find_unused_parameters_false": TrainingTypeEntry("ddp", {"find_unused_parameters": False}),
    "ddp_find_unused_parameters_true": TrainingTypeEntry("ddp", {"find_unused_parameters": True}),
    "ddp_spawn": TrainingTypeEntry("ddp_spawn"),
    "ddp_spawn_find_unused_parameters_false": TrainingTypeEntry(
        "ddp_spawn", {"find_unused_parameters": False}
    ),
    "ddp_spawn_find_unused_parameters_true": TrainingTypeEntry(
        "ddp_spawn", {"find_unused_parameters": True}
    ),
    # Lightning 2.x's names for forked ranks, the way to DDP from a notebook (ddpkit's fork
    # launcher: docs/notebooks.md)
    **{
        f"{name}{suffix}": TrainingTypeEntry("ddp_spawn", {"start_method": "fork", **extra})
        for name in ("ddp_fork", "ddp_notebook")
        for suffix, extra in (
            ("", {}),
            ("_find_unused_parameters_false", {"find_unused_parameters": False}),
            ("_find_unused_parameters_true", {"find_unused_parameters": True}),
        )
    },
}
