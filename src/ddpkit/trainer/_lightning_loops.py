"""The ``loops`` entry of a checkpoint, in Lightning 2.x's layout, both ways.

A ddpkit checkpoint carries what Lightning's own would at the same point of a fit — the fit
loop's epoch, batch, optimizer-step and scheduler progress — so that Lightning's
``Trainer.fit(ckpt_path=...)`` resumes it where ddpkit would (the same epoch, batch and step),
and ddpkit resumes a checkpoint Lightning wrote. The numbers follow Lightning's progress
trackers at the three points where a checkpoint is written during a fit (measured on Lightning
2.6, tests/trainer/test_checkpoints_both_ways.py compares them with Lightning's):

- a training batch's end (``every_n_train_steps``): the batch is started and processed, not
  completed; the epoch is started, not processed;
- a validation within the epoch (``val_check_interval``): the batch is completed;
- the epoch's end (``on_train_epoch_end``, or the validation at its end): the epoch is
  processed, not completed.

Outside a running fit (``trainer.save_checkpoint`` after it) every counter is complete.
"""

from __future__ import annotations

from typing import Any

from ddpkit.trainer._state import LoopState

#: ``pytorch-lightning_version`` of a ddpkit checkpoint: the Lightning release whose checkpoint
#: layout it follows (Lightning migrates a checkpoint from its version on load, and refuses one
#: without it).
LIGHTNING_FORMAT = "2.6.6"


def _counts(ready: int, completed: int, started: int | None = None) -> dict[str, int]:
    out = {"ready": ready, "completed": completed}
    if started is not None:
        out["started"] = started
    return out


def _progress(total: dict[str, int], current: dict[str, int]) -> dict[str, Any]:
    return {"total": total, "current": current}


def _batches(ready: int, completed: int) -> dict[str, int]:
    return {"ready": ready, "completed": completed, "started": ready, "processed": ready}


def _eval_loop(total: int = 0, latest: int = 0, *, last: bool = True) -> dict[str, Any]:
    """An evaluation loop that ran ``total`` batches, ``latest`` of them in its latest run (none:
    it has not run). ``last``: its progress tracks the last batch; the predict loop's does
    not."""
    progress: dict[str, Any] = _progress(_batches(total, total), _batches(latest, latest))
    if last:
        progress["is_last_batch"] = latest > 0
    return {"state_dict": {}, "batch_progress": progress}


def _epoch_progress(e: int, running: bool, epochs_completed: int) -> dict[str, int]:
    """Lightning's ``epoch_progress`` counters of epoch ``e``."""
    if not running:  # after the fit: every epoch it ran is complete
        return {"ready": e, "completed": e, "started": e, "processed": e}
    if epochs_completed > e:  # the epoch's end
        return {"ready": e + 1, "completed": e, "started": e + 1, "processed": e + 1}
    return {"ready": e + 1, "completed": e, "started": e + 1, "processed": e}  # within it


def fit_loop_state(state: LoopState) -> dict[str, Any]:
    """Lightning's ``checkpoint["loops"]`` for where ``state`` stands."""
    e, steps, batches, scheds = (
        state.current_epoch, state.global_step, state.fit_batches, state.scheduler_steps
    )  # fmt: skip
    steps0, batches0, scheds0 = state.epoch_start
    running = state.status.fn == "fit" and state.status.status == "running"
    running = running and state.status.stage in ("train", "validate") and not state.epochs_ended
    mid_batch = running and state.epochs_completed == e and state.status.stage == "train"
    epoch = _epoch_progress(e, running, state.epochs_completed)
    done = 1 if mid_batch else 0  # at a batch's end the batch is not completed yet
    # ddpkit counts the epoch's last batch in the loggers' step after on_train_epoch_end;
    # Lightning, before it (and its validation at the epoch's end, after it)
    stepped = state.batches_stepped
    if running and state.epochs_completed > e and state.status.stage == "train":
        stepped += 1
    val_loop = _eval_loop(*state.val_batches)
    now = batches - batches0
    steps_now, scheds_now = steps - steps0, scheds - scheds0
    optimizer = {
        "step": _progress(_counts(steps, steps), _counts(steps_now, steps_now)),
        "zero_grad": _progress(
            _counts(steps, steps, steps), _counts(steps_now, steps_now, steps_now)
        ),
    }
    fit_loop = {
        "state_dict": {},
        "epoch_loop.state_dict": {"_batches_that_stepped": stepped},
        "epoch_loop.batch_progress": {
            **_progress(_batches(batches, batches - done), _batches(now, now - done)),
            "is_last_batch": state.is_last_batch,
        },
        "epoch_loop.scheduler_progress": _progress(
            _counts(scheds, scheds), _counts(scheds_now, scheds_now)
        ),
        "epoch_loop.automatic_optimization.state_dict": {},
        "epoch_loop.automatic_optimization.optim_progress": {"optimizer": optimizer},
        "epoch_loop.manual_optimization.state_dict": {},
        "epoch_loop.manual_optimization.optim_step_progress": _progress(
            _counts(0, 0), _counts(0, 0)
        ),
        **{f"epoch_loop.val_loop.{k}": v for k, v in val_loop.items()},
        "epoch_progress": _progress(dict(epoch), dict(epoch)),
    }
    return {
        "fit_loop": fit_loop,
        "validate_loop": _eval_loop(),
        "test_loop": _eval_loop(),
        "predict_loop": _eval_loop(last=False),
    }


def read_position(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """Where a checkpoint's fit stands, as ddpkit's counters: Lightning's layout (ddpkit's and
    Lightning's own checkpoints), or ddpkit ≤ 0.2's (``epochs_completed``, ``epoch_batches``)."""
    loops = checkpoint.get("loops") or {}
    step = int(checkpoint.get("global_step", 0))
    fit = loops.get("fit_loop")
    if not isinstance(fit, dict):  # ddpkit's older layout (≤ 0.1: the epochs under "epoch")
        start = int(loops.get("epochs_completed", checkpoint.get("epoch", 0)))
        batches = int(loops.get("epoch_batches", 0))
        return {
            "epochs_completed": start, "epoch_batches": batches, "batches_stepped": step,
            "fit_batches": batches, "scheduler_steps": 0, "epoch_start": (step, 0, 0),
        }  # fmt: skip
    epoch = fit["epoch_progress"]["current"]
    batch = fit["epoch_loop.batch_progress"]
    optim = fit["epoch_loop.automatic_optimization.optim_progress"]["optimizer"]["step"]
    sched = fit["epoch_loop.scheduler_progress"]
    processed, now = int(epoch["processed"]), int(batch["current"]["ready"])
    in_epoch = int(epoch["started"]) > processed  # an epoch started and not processed
    # Lightning's restart rules: at an epoch's last batch the epoch counts as done; within it,
    # the batches it ran are skipped; after its end (or the fit's) the next epoch starts anew.
    if in_epoch and batch.get("is_last_batch") and now > 0:
        epochs, skip = processed + 1, 0
    else:
        epochs, skip = processed, now if in_epoch else 0
    total = int(batch["total"]["ready"])
    return {
        "is_last_batch": bool(batch.get("is_last_batch", False)),
        "epochs_completed": epochs,
        "epoch_batches": skip,
        "batches_stepped": int(fit["epoch_loop.state_dict"].get("_batches_that_stepped", step)),
        "fit_batches": total,
        "scheduler_steps": int(sched["total"]["completed"]),
        "epoch_start": (
            step - int(optim["current"]["completed"]),
            total - now,
            int(sched["total"]["completed"]) - int(sched["current"]["completed"]),
        ),
    }


def restart_stage(checkpoint: dict[str, Any], max_steps: int) -> tuple[bool, bool, bool]:
    """Lightning's fit loop after loading ``checkpoint``: whether it is *restarting* (the
    checkpoint's epoch unfinished, or ``max_steps`` set: it then skips the sanity check);
    whether it restarts *mid-epoch* (the resumed epoch's ``on_train_epoch_start`` is not called
    again); and whether the loggers' step counts one more batch (a checkpoint saved before the
    batch it was saved in was counted: Lightning's ``_batches_that_stepped += 1``). ddpkit
    ≤ 0.2's layout: none."""
    fit = (checkpoint.get("loops") or {}).get("fit_loop")
    if not isinstance(fit, dict):
        return False, False, False
    cur, tot = fit["epoch_progress"]["current"], fit["epoch_progress"]["total"]
    unfinished = cur["ready"] != cur["processed"] or cur["started"] != cur["processed"]
    restarting = unfinished or max_steps != -1
    mid_epoch = (
        restarting
        and tot["started"] == tot["ready"]
        and tot["processed"] == tot["started"] - 1
        and tot["completed"] == tot["processed"]
    )
    batch = fit["epoch_loop.batch_progress"]["total"]
    whole = batch["started"] == batch["ready"] and batch["processed"] == batch["started"]
    on_batch_end = whole and batch["completed"] == batch["processed"] - 1
    on_last = whole and batch["completed"] == batch["processed"]
    return restarting, mid_epoch, restarting and (on_batch_end or not on_last)
