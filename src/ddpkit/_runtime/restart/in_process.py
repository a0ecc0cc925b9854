"""A restart in the launching process, which runs each attempt itself (rank 0 of the subprocess
launcher), and the checkpoint ddpkit keeps for a fit without a ModelCheckpoint."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ddpkit._runtime.restart.attempt import current_attempt, in_process
from ddpkit._runtime.restart.port import Checkpointing, FitPort
from ddpkit._runtime.restart.resume import KEPT_NAME
from ddpkit.utilities import _rng as rng

R = TypeVar("R")


class FitStart:
    """What the launching process held when a fit first started: its RNG states, the module's
    weights, the callbacks' state and the loop's own; put back when the fit starts again."""

    def __init__(self, fit: FitPort) -> None:
        self.rng = rng.capture()
        self.weights = {
            k: v.detach().to("cpu", copy=True) for k, v in fit.model.state_dict().items()
        }
        self.callbacks = [copy.deepcopy(cb.state_dict()) for cb in fit.callbacks]
        self.loop = copy.deepcopy(fit.loop_state())

    def restore(self, fit: FitPort) -> None:
        rng.restore(self.rng)
        fit.model.load_state_dict(self.weights)
        for callback, state in zip(fit.callbacks, self.callbacks):
            if state:
                callback.load_state_dict(copy.deepcopy(state))
        fit.load_loop_state(copy.deepcopy(self.loop))


class InProcessAttempts:
    """The attempts of one fit in the launching process of a launch that may restart: the first
    keeps the fit's start, each later one ends the failed attempt and goes back to it (the
    other ranks are new processes, as if nothing had run). Anywhere else it only runs the fit."""

    def __init__(self) -> None:
        self._start: FitStart | None = None
        self._failed: BaseException | None = None

    def run(self, fit: FitPort | None, body: Callable[[], R]) -> R:
        """``body()``, the attempt of ``fit`` (None: not a fit, nothing to keep)."""
        if fit is None or not in_process() or not current_attempt().max_restarts:
            return body()
        if self._start is None:
            self._start = FitStart(fit)
        else:
            if self._failed is not None:
                fit.end_failed(self._failed)
            self._start.restore(fit)
        self._failed = None
        try:
            return body()
        except BaseException as exc:
            self._failed = exc
            raise


def save_kept(trainer: Checkpointing) -> None:
    """ddpkit's own checkpoint for a fit that may restart and has no ModelCheckpoint, at the end
    of every training epoch, on every rank's call, into the launcher's private run folder
    (removed when the launch ends): the body of either Trainer's hook."""
    if trainer.world_size == 1 or trainer.sanity_checking:
        return
    folder = current_attempt().run_dir
    if trainer.is_global_zero and not folder:  # ddpkit's launchers give rank 0 the folder
        raise RuntimeError("a fit that may restart has no run folder")  # a bug, not input
    # Only rank 0 writes; the others join the save (the RNG gather, the barrier).
    trainer.save_checkpoint(Path(folder or ".") / KEPT_NAME)
