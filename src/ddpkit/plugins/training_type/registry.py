"""Training-type names users may pass as ``strategy="..."`` or in ``plugins=[...]`` (the table
lives in :mod:`ddpkit.spellings`, which the command line's help reads without torch)."""

from __future__ import annotations

from ddpkit.spellings import TRAINING_TYPES, TrainingTypeEntry

__all__ = ["TRAINING_TYPES", "TrainingTypeEntry"]
