"""The trainer as the loop sees it, without importing ``Trainer`` (``_trainer`` imports the
loop). ``Trainer`` satisfies it structurally: ``run_stage(self, ...)`` is where mypy checks."""

from __future__ import annotations

from typing import Any, Protocol

from ddpkit.accelerators._base import Accelerator
from ddpkit.core._protocols import CallbackTrainer
from ddpkit.plugins.precision._base import PrecisionPlugin


class LoopTrainer(CallbackTrainer, Protocol):
    """What the loop reads of the trainer besides what callbacks read: the built plugins, and
    the checkpoint the summary of a fit names."""

    @property
    def precision_plugin(self) -> PrecisionPlugin: ...
    @property
    def accelerator(self) -> Accelerator: ...
    @property
    def checkpoint_callback(self) -> Any: ...
    @property
    def checkpoint_path(self) -> str | None: ...
