"""A fit that starts again (``max_restarts``, torchrun's ``--max-restarts``, ``ddpkit run
--max-restarts``) and carries on exactly where the newest complete checkpoint left it.

- Every checkpoint a fit writes on all ranks carries each rank's RNG states
  (:func:`rng_states`, gathered as bytes in tensors); a restarted fit sets them back just before
  its first epoch (:func:`rng_of_rank`), so dropout masks and shuffles go on as they would have.
- Rank 0 decides where a restarted fit resumes (:func:`resume_decision`, through
  :mod:`ddpkit.ranks.restart`) and tells the others as JSON.
- Rank 0 of the subprocess launcher is the user's own process, which runs the fit again itself:
  it keeps the state it had when the fit first started (:class:`FitStart`: RNG, weights,
  callbacks) and goes back to it at each restart, as a fresh process would be.
- Without a ModelCheckpoint, ddpkit keeps one of its own at every epoch's end
  (:class:`KeptCheckpoint`) in the launcher's private run folder.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpkit.callbacks.base import Callback
from ddpkit.errors import MisconfigurationError
from ddpkit.ranks.restart import (
    Attempt,
    current_attempt,
    in_process,
    newest_checkpoint,
    resume_line,
)
from ddpkit.utilities import rng

__all__ = [
    "FitStart",
    "KeptCheckpoint",
    "Resume",
    "check_restarts",
    "position",
    "rng_of_rank",
    "rng_states",
]

#: the file ddpkit keeps in the run folder when the user has no ModelCheckpoint
KEPT_NAME = "restart.ckpt"
#: where a checkpoint keeps the ranks' RNG states
RNG_KEY = "ddpkit_rng"


def check_restarts(max_restarts: int, plan: Any) -> None:
    """``Trainer(max_restarts=N)`` restarts ranks that ddpkit's launchers start, on this machine:
    anything else is refused here, before any rank starts."""
    if not max_restarts:
        return
    call = f"Trainer(max_restarts={max_restarts})"
    if plan.environment.value != "local":
        raise MisconfigurationError(
            f"{call}: the ranks were started by {plan.environment.value} (not ddpkit), which "
            f"restarts them itself. Fix: drop max_restarts and let the launcher restart the "
            f"ranks (torchrun --max-restarts {max_restarts}); each restarted fit resumes from "
            f"the newest complete checkpoint by itself."
        )
    if plan.launcher.value == "none":
        raise MisconfigurationError(
            f"{call}: this run is one process, and a restart starts the ranks again. Fix: "
            f"run several ranks (devices=2, strategy='ddp'), or drop max_restarts."
        )
    if plan.num_nodes.value > 1:
        raise MisconfigurationError(
            f"{call} with num_nodes={plan.num_nodes.value}: ddpkit's launcher on each machine "
            f"starts that machine's ranks only and cannot restart the others. Fix: start the "
            f"job with torchrun --nnodes={plan.num_nodes.value} --max-restarts {max_restarts} "
            f"(and drop max_restarts here)."
        )


def rng_states(strategy: Any, *, collective: bool) -> dict[str, Any]:
    """Every rank's RNG states (``collective``: gathered, every rank must call it; else this
    rank's own only, for a rank that may be alone)."""
    mine = rng.capture()
    if not collective:
        return {"world_size": strategy.world_size, "ranks": {str(strategy.global_rank): mine}}
    gathered = strategy.all_gather_bytes(rng.encode(mine))
    states = {
        str(r): (mine if r == strategy.global_rank else rng.decode(data))
        for r, data in enumerate(gathered)
    }
    return {"world_size": len(gathered), "ranks": states}


def rng_of_rank(
    checkpoint: dict[str, Any] | None, rank: int, world_size: int
) -> dict[str, Any] | None:
    """This rank's RNG states in ``checkpoint``; None when it has none for a job of this size."""
    saved = (checkpoint or {}).get(RNG_KEY)
    if not isinstance(saved, dict) or saved.get("world_size") != world_size:
        return None
    found = saved.get("ranks", {}).get(str(rank))
    return found if isinstance(found, dict) else None


def checkpoint_folders(callbacks: list[Any]) -> list[str]:
    """Where the fit's checkpoints go: every ModelCheckpoint's folder, ddpkit's own."""
    folders = []
    for callback in callbacks:
        # A ModelCheckpoint (ddpkit's or Lightning's), or ddpkit's own (``restart_folder``).
        folder = getattr(callback, "restart_folder", None)
        if folder is None and hasattr(callback, "best_model_path"):
            folder = getattr(callback, "dirpath", None)
        if folder:
            folders.append(str(folder))
    return folders


@dataclass(frozen=True)
class Resume:
    """Where a stage starts from: ``path`` (None: the module as it is) and, for a restarted fit,
    the attempt."""

    path: str | None
    attempt: Attempt | None = None

    @classmethod
    def decide(cls, strategy: Any, callbacks: list[Any], given: str | None, fn: str) -> Resume:
        """On every rank (for a distributed fit, one collective). Rank 0 decides: on a restart,
        the newest complete checkpoint written since the run started, else the fit's own
        ``ckpt_path``; the other ranks are told as JSON."""
        if fn != "fit" or strategy.world_size == 1:
            return cls(given)
        decision: dict[str, Any] | None = None
        if strategy.is_global_zero:
            attempt = current_attempt()
            decision = {"path": given, "attempt": None}
            if attempt.number > 0:
                found = newest_checkpoint(checkpoint_folders(callbacks), attempt.since())
                decision = {
                    "path": str(found) if found is not None else given,
                    "attempt": [attempt.number, attempt.max_restarts, attempt.cause],
                }
        decision = strategy.broadcast_json(decision)
        told = decision["attempt"]
        if told is None:
            return cls(decision["path"])
        return cls(decision["path"], Attempt(number=told[0], max_restarts=told[1], cause=told[2]))

    def announce(self, strategy: Any, checkpoint: dict[str, Any] | None) -> None:
        """Rank 0 of a restarted fit says so: one line, the cause, where it resumes."""
        if self.attempt is not None and strategy.is_global_zero:
            sys.stderr.write(f"{resume_line(self.attempt, self.path, position(checkpoint))}\n")
            sys.stderr.flush()

    def before_epochs(self, strategy: Any, checkpoint: Any) -> Callable[[], None] | None:
        """For a restarted fit: set this rank's RNG states of the checkpoint, just before the
        first epoch, where the uninterrupted run stood when it wrote it."""
        if self.attempt is None:
            return None
        state = rng_of_rank(checkpoint, strategy.global_rank, strategy.world_size)
        return None if state is None else (lambda: rng.restore(state))


def position(checkpoint: dict[str, Any] | None) -> str:
    """Where a checkpoint stands: "epoch 2, global step 16"."""
    if checkpoint is None:
        return "epoch 0, global step 0"
    loops = checkpoint.get("loops") or {}
    epochs = loops.get("epochs_completed")
    if epochs is None:  # Lightning's: the epochs its fit loop processed
        progress = (loops.get("fit_loop") or {}).get("epoch_progress") or {}
        epochs = (progress.get("current") or {}).get("processed", checkpoint.get("epoch", 0))
    return f"epoch {epochs}, global step {checkpoint.get('global_step', 0)}"


class FitStart:
    """What the launching process held when a fit first started: its RNG states, the module's
    weights, the callbacks' and the DataModule's state. Kept by rank 0 of the subprocess
    launcher (its own process runs each attempt), put back when the fit starts again."""

    def __init__(self, model: Any, callbacks: list[Any], datamodule: Any) -> None:
        self.rng = rng.capture()
        self.weights = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        self.callbacks = [copy.deepcopy(cb.state_dict()) for cb in callbacks]
        self.datamodule: dict[str, Any] = copy.deepcopy(getattr(datamodule, "state_dict", dict)())

    @classmethod
    def enter(cls, request: Any, callbacks: list[Any]) -> None:
        """At the start of a fit (``request``: its StageRequest): in the launching process of a
        launch that may restart, keep the state of the first attempt, and go back to it in the
        others (the other ranks are new processes, as if nothing had run)."""
        if request.fit_start is not None:
            request.fit_start.restore(request.model, callbacks, request.datamodule)
        elif in_process() and current_attempt().max_restarts > 0:
            request.fit_start = cls(request.model, callbacks, request.datamodule)

    def restore(self, model: Any, callbacks: list[Any], datamodule: Any) -> None:
        rng.restore(self.rng)
        model.load_state_dict(self.weights)
        for callback, state in zip(callbacks, self.callbacks):
            if state:
                callback.load_state_dict(copy.deepcopy(state))
        if self.datamodule and datamodule is not None:
            datamodule.load_state_dict(copy.deepcopy(self.datamodule))


class KeptCheckpoint(Callback):
    """ddpkit's own checkpoint for a fit that may restart and has no ModelCheckpoint: written
    at the end of every training epoch, on every rank's call, into the launcher's private run
    folder (removed when the launch ends)."""

    @property
    def restart_folder(self) -> str | None:
        return current_attempt().run_dir

    @property
    def state_key(self) -> str:
        return "ddpkit.KeptCheckpoint"

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if trainer.world_size == 1 or trainer.sanity_checking:
            return
        folder = self.restart_folder
        if trainer.is_global_zero and not folder:  # ddpkit's launchers give rank 0 the folder
            raise RuntimeError("a fit that may restart has no run folder")  # a bug, not input
        # Only rank 0 writes; the others join the save (the RNG gather, the barrier).
        trainer.save_checkpoint(Path(folder or ".") / KEPT_NAME)
