"""Training-type names users may pass as ``strategy="..."`` or in ``plugins=[...]``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["TRAINING_TYPES", "TrainingTypeEntry"]


@dataclass(frozen=True)
class TrainingTypeEntry:
    """A registry name: which kind of training type it builds, with which options."""

    #: the plugin's kind: "single_device", "ddp" or "ddp_spawn"
    kind: str
    #: keyword arguments for the plugin's constructor that the name fixes
    options: dict[str, Any] = field(default_factory=dict)


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
}
