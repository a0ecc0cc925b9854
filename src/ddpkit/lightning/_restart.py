"""Restarts on Lightning's loop: ``ddpkit.lightning.Trainer(max_restarts=N)`` (ddpkit's launchers
restart the ranks) and a restarted torchrun worker, with the contract of ddpkit's own Trainer
(:mod:`ddpkit.trainer.restart`, docs/reliability.md):

- :class:`RestartState`, a callback every ``ddpkit.lightning.Trainer`` has (first): each rank's
  RNG states go into every checkpoint (gathered as bytes in tensors); without a ModelCheckpoint,
  a fit that may restart writes ddpkit's own checkpoint at each epoch's end into the launcher's
  run folder;
- :class:`RestartConnector`, Lightning's checkpoint connector, which makes a restarted fit resume
  from the newest complete checkpoint (rank 0 decides once the checkpoint folders are known,
  after the ``setup`` hooks; the others are told as JSON) and sets the RNG states back just
  before the fit loop starts;
- :class:`InProcessRestart`: rank 0 of the subprocess launcher is the user's own process and runs
  the fit again itself: the failed attempt is ended as Lightning ends a failed fit
  (``on_exception``, the loggers finalized, the strategy torn down), and the trainer goes back
  to the state it had when the fit first started (RNG, weights, callbacks, the fit loop).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.loops.loop import _Loop
from pytorch_lightning.trainer import call
from pytorch_lightning.trainer.connectors.checkpoint_connector import _CheckpointConnector
from pytorch_lightning.trainer.states import TrainerFn, TrainerStatus

from ddpkit.errors import MisconfigurationError
from ddpkit.ranks.restart import current_attempt, in_process
from ddpkit.trainer.restart import KEPT_NAME, RNG_KEY, Resume, rng_states
from ddpkit.utilities import exchange, rng

__all__ = [
    "Exchange",
    "InProcessRestart",
    "RestartConnector",
    "RestartState",
    "check_max_restarts",
    "strategy_restarts",
]


def check_max_restarts(call: str, value: Any) -> int:
    """``max_restarts``: an int ≥ 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MisconfigurationError(
            f"{call}(max_restarts={value!r}): pass an int ≥ 0 (0: a failure ends the job). "
            f"Fix: {call}(max_restarts=1)."
        )
    return value


def strategy_restarts(strategy: Any) -> int:
    """The restarts a strategy may make (``SupervisedDDPStrategy(max_restarts=...)``)."""
    return int(getattr(strategy, "max_restarts", 0) or 0)


class Exchange:
    """What ddpkit's restart code needs of a Lightning strategy: its ranks, and JSON / bytes
    between them in tensors (never Lightning's pickling ``broadcast``)."""

    def __init__(self, strategy: Any) -> None:
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

    @contextlib.contextmanager
    def _collective(self, where: str) -> Iterator[torch.device]:
        import torch.distributed as dist

        nccl = dist.get_backend() == "nccl"
        device = self.strategy.root_device if nccl else torch.device("cpu")
        watched = getattr(self.strategy, "_collective", None)  # SupervisedDDPStrategy's watchdog
        with watched(where) if watched is not None else contextlib.nullcontext():
            yield device

    def broadcast_json(self, obj: Any, src: int = 0) -> Any:
        import torch.distributed as dist

        if not dist.is_initialized():
            return exchange.json_round_trip(obj)
        with self._collective("broadcast_json") as device:
            return exchange.broadcast_json(obj, src, device)

    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        import torch.distributed as dist

        if not dist.is_initialized():
            return [data]
        with self._collective("all_gather_bytes") as device:
            return exchange.all_gather_bytes(data, device)


class RestartState(pl.Callback):
    """Each rank's RNG states in every checkpoint, set back by a restarted fit; ddpkit's own
    checkpoint (``kept``) for a fit that may restart without a ModelCheckpoint."""

    def __init__(self, kept: bool = False) -> None:
        self.kept = kept

    @property
    def state_key(self) -> str:
        return "ddpkit.RestartState"

    @property
    def restart_folder(self) -> str | None:
        return current_attempt().run_dir if self.kept else None

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        # A save in on_exception may find this rank alone: no collective then.
        together = trainer.state.status == TrainerStatus.RUNNING
        checkpoint[RNG_KEY] = rng_states(Exchange(trainer.strategy), collective=together)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.kept or trainer.world_size == 1 or trainer.sanity_checking:
            return
        folder = self.restart_folder
        if trainer.is_global_zero and not folder:  # ddpkit's launchers give rank 0 the folder
            raise RuntimeError("a fit that may restart has no run folder")  # a bug, not input
        trainer.save_checkpoint(Path(folder or ".") / KEPT_NAME)


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
        strategy = Exchange(trainer.strategy)
        given = None if checkpoint_path is None else str(checkpoint_path)
        callbacks: list[Any] = trainer.callbacks  # type: ignore[attr-defined]
        resume = Resume.decide(strategy, list(callbacks), given, "fit")
        super()._restore_modules_and_callbacks(resume.path, weights_only)
        resume.announce(strategy, self._loaded_checkpoint or None)
        self._before_loop = resume.before_epochs(strategy, self._loaded_checkpoint)

    def restore_training_state(self) -> None:
        """Then the RNG states of a restarted fit, last before the fit loop starts: Lightning
        makes the first epoch's data iterator there (a draw from torch's generator), where the
        uninterrupted run made it after writing the checkpoint; the sanity check, which a
        restart skips anyway, runs with its own generator state."""
        super().restore_training_state()
        before, self._before_loop = self._before_loop, None
        if before is not None:
            before()


def _loops(loop: _Loop) -> Iterator[_Loop]:
    yield loop
    for child in vars(loop).values():
        if isinstance(child, _Loop):
            yield from _loops(child)


class InProcessRestart:
    """Rank 0 of the subprocess launcher runs each attempt of a Lightning fit itself (see the
    module docstring); elsewhere it only runs the stage."""

    def __init__(self) -> None:
        self._start: dict[str, Any] | None = None
        self._failed: BaseException | None = None

    def run(self, trainer: pl.Trainer | None, function: Any, args: Any, kwargs: Any) -> Any:
        fit = trainer is not None and trainer.state.fn == TrainerFn.FITTING
        if trainer is None or not fit or not in_process() or not current_attempt().max_restarts:
            return function(*args, **kwargs)
        model = args[0]  # Lightning's _fit_impl(model, ...)
        if self._failed is not None:
            self._end_failed(trainer, self._failed)
            assert self._start is not None
            self._restore(trainer, model, self._start)
        else:
            self._start = self._capture(trainer, model)
        self._failed = None
        try:
            return function(*args, **kwargs)
        except BaseException as exc:
            self._failed = exc
            raise

    @staticmethod
    def _end_failed(trainer: pl.Trainer, exc: BaseException) -> None:
        """What Lightning does to a fit that raised (its own handler sees the last only)."""
        call._interrupt(trainer, exc)
        trainer._teardown()
        trainer.state.stage = None
        trainer.state.fn, trainer.state.status = TrainerFn.FITTING, TrainerStatus.RUNNING
        trainer.training = True
        trainer.should_stop = False

    @staticmethod
    def _capture(trainer: pl.Trainer, model: Any) -> dict[str, Any]:
        callbacks: list[Any] = trainer.callbacks  # type: ignore[attr-defined]
        return {
            "rng": rng.capture(),
            "weights": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
            "callbacks": [copy.deepcopy(cb.state_dict()) for cb in callbacks],
            "fit_loop": copy.deepcopy(trainer.fit_loop.state_dict()),
        }

    @staticmethod
    def _restore(trainer: pl.Trainer, model: Any, start: dict[str, Any]) -> None:
        rng.restore(start["rng"])
        model.load_state_dict(start["weights"])
        for callback, state in zip(trainer.callbacks, start["callbacks"]):  # type: ignore[attr-defined]
            if state:
                callback.load_state_dict(copy.deepcopy(state))
        trainer.fit_loop.load_state_dict(copy.deepcopy(start["fit_loop"]))
        for loop in _loops(trainer.fit_loop):  # a fresh fit, not one resuming mid-way
            loop.on_iteration_done()
