"""Restarts on Lightning's loop: ``ddpkit.lightning.Trainer(max_restarts=N)`` (ddpkit's launchers
restart the ranks) and a restarted torchrun worker, with the contract of
:mod:`ddpkit._runtime.restart` (docs/reliability.md), reached through its port:

- :class:`LightningFit`, Lightning's fit as restart sees it (:class:`~ddpkit._runtime.restart.
  port.FitPort`): its ranks, callbacks and checkpoint folders, where a checkpoint stands, the fit
  loop's state, and how Lightning ends a failed fit (``on_exception``, the loggers finalized, the
  strategy torn down);
- :class:`RestartState`, a callback every ``ddpkit.lightning.Trainer`` has (first): each rank's
  RNG states go into every checkpoint; without a ModelCheckpoint, a fit that may restart writes
  ddpkit's own checkpoint at each epoch's end into the launcher's run folder;
- :class:`RestartConnector`, Lightning's checkpoint connector, which makes a restarted fit resume
  from the newest complete checkpoint (rank 0 decides once the checkpoint folders are known,
  after the ``setup`` hooks; the others are told as JSON) and sets the RNG states back just
  before the fit loop starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.trainer.states import TrainerFn, TrainerStatus
from torch import nn

from ddpkit._runtime.ranks._clean_exit import destroy_group_at_exit
from ddpkit._runtime.restart.attempt import current_attempt
from ddpkit._runtime.restart.in_process import save_kept
from ddpkit._runtime.restart.port import Ranks, Stateful
from ddpkit._runtime.restart.resume import RNG_KEY, Resume, rng_states
from ddpkit.lightning._lightning_private import _CheckpointConnector, _interrupt, _Loop
from ddpkit.utilities._exchange import Exchanger


def strategy_restarts(strategy: Any) -> int:
    """The restarts a strategy may make (``SupervisedDDPStrategy(max_restarts=...)``)."""
    return int(getattr(strategy, "max_restarts", 0) or 0)


class _StrategyRanks(Exchanger):
    """A Lightning strategy's ranks, and ddpkit's own exchanges between them in tensors (never
    Lightning's pickling ``broadcast``), inside ddpkit's stall watchdog where it supervises."""

    def __init__(self, strategy: Any) -> None:
        # SupervisedDDPStrategy's watchdog; Lightning's own strategies have none.
        super().__init__(lambda: strategy.root_device, getattr(strategy, "_collective", None))
        self.strategy = strategy

    @property
    def world_size(self) -> int:
        return int(self.strategy.world_size)

    @property
    def global_rank(self) -> int:
        return int(self.strategy.global_rank)

    @property
    def is_global_zero(self) -> bool:
        return bool(self.strategy.is_global_zero)


def _loops(loop: _Loop) -> Iterator[_Loop]:
    yield loop
    for child in vars(loop).values():
        if isinstance(child, _Loop):
            yield from _loops(child)


@dataclass(frozen=True)
class LightningFit:
    """One ``fit`` on Lightning's loop (``model``: the module ``fit`` was given)."""

    trainer: pl.Trainer
    model: nn.Module

    @property
    def ranks(self) -> Ranks:
        return _StrategyRanks(self.trainer.strategy)

    @property
    def callbacks(self) -> Sequence[Stateful]:
        callbacks: list[Stateful] = self.trainer.callbacks  # type: ignore[attr-defined]
        return callbacks

    def checkpoint_folders(self) -> list[str]:
        folders = []
        for callback in self.callbacks:
            if isinstance(callback, ModelCheckpoint) and callback.dirpath:
                folders.append(str(callback.dirpath))
            elif isinstance(callback, RestartState) and callback.kept:
                folders.append(str(current_attempt().run_dir or ""))
        return [folder for folder in folders if folder]

    def position(self, checkpoint: Mapping[str, Any] | None) -> str:
        if checkpoint is None:
            return "epoch 0, global step 0"
        fit_loop = (checkpoint.get("loops") or {}).get("fit_loop") or {}
        current = (fit_loop.get("epoch_progress") or {}).get("current") or {}
        epochs = current.get("processed", checkpoint.get("epoch", 0))
        return f"epoch {epochs}, global step {checkpoint.get('global_step', 0)}"

    def loop_state(self) -> dict[str, Any]:
        return self.trainer.fit_loop.state_dict()

    def load_loop_state(self, state: dict[str, Any]) -> None:
        fit_loop = self.trainer.fit_loop
        fit_loop.load_state_dict(state)
        for loop in _loops(fit_loop):  # a fresh fit, not one resuming mid-way
            loop.on_iteration_done()

    def end_failed(self, exc: BaseException) -> None:
        """What Lightning does to a fit that raised (its own handler sees the last only)."""
        trainer = self.trainer
        _interrupt(trainer, exc)
        trainer._teardown()
        trainer.state.stage = None
        trainer.state.fn, trainer.state.status = TrainerFn.FITTING, TrainerStatus.RUNNING
        trainer.training = True
        trainer.should_stop = False


class RestartState(pl.Callback):
    """Each rank's RNG states in every checkpoint, set back by a restarted fit; ddpkit's own
    checkpoint (``kept``) for a fit that may restart without a ModelCheckpoint; a rank of
    Lightning's own spawn launcher that ends a stage well leaves no process group to its exit
    (:mod:`ddpkit._runtime.ranks._clean_exit`)."""

    def __init__(self, kept: bool = False) -> None:
        self.kept = kept

    @property
    def state_key(self) -> str:
        return "ddpkit.RestartState"

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        # A save in on_exception may find this rank alone: no collective then.
        together = trainer.state.status == TrainerStatus.RUNNING
        checkpoint[RNG_KEY] = rng_states(_StrategyRanks(trainer.strategy), collective=together)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.kept:
            save_kept(trainer)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        destroy_group_at_exit()  # (Lightning calls teardown hooks after a stage that ended well)


class RestartConnector(_CheckpointConnector):
    """Lightning's checkpoint connector; a restarted fit resumes from the newest complete
    checkpoint (see the module docstring)."""

    _before_loop: Callable[[], None] | None = None

    def _restore_modules_and_callbacks(
        self, checkpoint_path: Any = None, weights_only: bool | None = None
    ) -> None:
        trainer = self.trainer
        self._before_loop = None
        if trainer.state.fn != TrainerFn.FITTING:
            super()._restore_modules_and_callbacks(checkpoint_path, weights_only)
            return
        fit = LightningFit(trainer, trainer.lightning_module)
        given = None if checkpoint_path is None else str(checkpoint_path)
        resume = Resume.decide(fit, given)
        super()._restore_modules_and_callbacks(resume.path, weights_only)
        resume.announce(fit, self._loaded_checkpoint or None)
        self._before_loop = resume.before_epochs(fit.ranks, self._loaded_checkpoint)

    def restore_training_state(self) -> None:
        """Then the RNG states of a restarted fit, last before the fit loop starts: Lightning
        makes the first epoch's data iterator there (a draw from torch's generator), where the
        uninterrupted run made it after writing the checkpoint; the sanity check, which a
        restart skips anyway, runs with its own generator state."""
        super().restore_training_state()
        before, self._before_loop = self._before_loop, None
        if before is not None:
            before()
