"""ddpkit's loop as restart sees it (:class:`ddpkit._runtime.restart.port.FitPort`), and the
callback that keeps ddpkit's own checkpoint for a fit that may restart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from ddpkit._runtime.restart.attempt import current_attempt
from ddpkit._runtime.restart.in_process import save_kept
from ddpkit._runtime.restart.port import Checkpointing, Ranks, Stateful
from ddpkit.callbacks._base import Callback
from ddpkit.callbacks._checkpoint import ModelCheckpoint
from ddpkit.trainer._state import LoopState


@dataclass(frozen=True)
class LoopFit:
    """One ``fit`` on ddpkit's loop: ``ranks`` is the Trainer's training type."""

    ranks: Ranks
    state: LoopState
    model: nn.Module
    datamodule: Any

    @classmethod
    def of(
        cls, fn: str, ranks: Ranks, state: LoopState, model: nn.Module, datamodule: Any
    ) -> LoopFit | None:
        """The stage ``fn`` as restart sees it: a fit, or None."""
        return cls(ranks, state, model, datamodule) if fn == "fit" else None

    @property
    def callbacks(self) -> Sequence[Stateful]:
        return self.state.callbacks

    def checkpoint_folders(self) -> list[str]:
        folders = []
        for callback in self.state.callbacks:
            if isinstance(callback, ModelCheckpoint) and callback.dirpath:
                folders.append(str(callback.dirpath))
            elif isinstance(callback, KeptCheckpoint) and current_attempt().run_dir:
                folders.append(str(current_attempt().run_dir))
        return folders

    def position(self, checkpoint: Mapping[str, Any] | None) -> str:
        if checkpoint is None:
            return "epoch 0, global step 0"
        loops = checkpoint.get("loops") or {}
        epochs = loops.get("epochs_completed")  # ddpkit <= 0.2's layout
        if epochs is None:  # Lightning's (ddpkit's own now): the epochs its fit loop processed
            progress = (loops.get("fit_loop") or {}).get("epoch_progress") or {}
            epochs = (progress.get("current") or {}).get("processed", checkpoint.get("epoch", 0))
        return f"epoch {epochs}, global step {checkpoint.get('global_step', 0)}"

    def loop_state(self) -> dict[str, Any]:
        # What the loop keeps of its own across fits: the DataModule's state (a duck-typed one
        # may have none).
        state_dict = getattr(self.datamodule, "state_dict", None)
        return dict(state_dict()) if callable(state_dict) else {}

    def load_loop_state(self, state: dict[str, Any]) -> None:
        if state and self.datamodule is not None:
            self.datamodule.load_state_dict(state)

    def end_failed(self, exc: BaseException) -> None:
        """Nothing left to do: the stage's own handler ended it (``on_exception``, the loggers
        finalized) before the exception left it."""


class KeptCheckpoint(Callback):
    """ddpkit's own checkpoint for a fit that may restart and has no ModelCheckpoint
    (:func:`~ddpkit._runtime.restart.in_process.save_kept`)."""

    @property
    def state_key(self) -> str:
        return "ddpkit.KeptCheckpoint"

    def on_train_epoch_end(self, trainer: Checkpointing, pl_module: nn.Module) -> None:
        save_kept(trainer)
