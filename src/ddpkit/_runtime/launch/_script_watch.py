"""The supervisor thread of rank zero's job: polls the children while rank zero runs its
stages, and hands what it sees to the job's
:class:`~ddpkit._runtime.process.context.ProcessContext`."""

from __future__ import annotations

import os
import sys
import time
from typing import Protocol

from ddpkit._runtime.launch._interrupter import StageInterrupter
from ddpkit._runtime.process.context import ChildFailed, ProcessContext, RankZero
from ddpkit._runtime.process.ending import (
    GRACE_SECONDS,
    STALL_GATHER_SECONDS,
)
from ddpkit._runtime.process.proc import Rank
from ddpkit._runtime.process.signals import SignalFlag


class WatchedJob(Protocol):
    """What the watch reads of the job it watches."""

    context: ProcessContext
    signals: SignalFlag
    interrupter: StageInterrupter
    rank_zero: RankZero
    #: the stages rank zero has started
    stages: int
    #: rank zero's script has ended (its atexit runs)
    exiting: bool

    def stages_of(self, rank: int) -> int: ...

    def close(self) -> None: ...


class ChildWatch:
    """Polls the children of ``job`` until the job ends; see :meth:`run`."""

    def __init__(self, job: WatchedJob) -> None:
        self.job = job

    def run(self) -> None:
        ctx = self.job.context
        early_exit_since: float | None = None
        while not ctx.claimed:
            outcome = ctx.look(self.job.signals)
            if outcome is None and (silent := self._silent_after_stall()) is not None:
                outcome = ChildFailed(silent)
            if outcome is not None:
                if ctx.conclude(outcome):
                    self._unwind_stage()
                return
            exited = [h for h in ctx.ranks if h.poll() is not None]
            if exited and len(exited) == len(ctx.ranks) and not self.job.interrupter.armed:
                return  # every child finished its script
            if exited and self.job.interrupter.armed and self.job.rank_zero.stall is None:
                # A child that finished its script while rank zero is in a stage never joins
                # it: at once if it never started this stage, after the grace period if it did
                # (the very end of a stage may race with a fast child's exit).
                early_exit_since = early_exit_since or time.monotonic()
                never_started = self.job.stages_of(exited[0].rank) < self.job.stages
                waited = time.monotonic() - early_exit_since > GRACE_SECONDS
                if (never_started or waited) and ctx.conclude(ChildFailed(exited[0])):
                    self._unwind_stage()
                    return
            else:
                early_exit_since = None
            ahead = [h for h in ctx.ranks if self.job.stages_of(h.rank) > self.job.stages]
            if self.job.exiting and ahead:
                self._stage_without_rank_zero(ahead[0])
                return

    def _stage_without_rank_zero(self, ahead: Rank) -> None:
        n = self.job.stages_of(ahead.rank)
        rank = self.job.rank_zero.rank
        note = (
            f"started its stage #{n} after rank {rank}'s script had ended with {self.job.stages}: "
            f"every rank must make the same Trainer calls (a call under "
            f"`if not trainer.is_global_zero:` runs on the other ranks only)"
        )
        self.job.context.conclude(
            ChildFailed(ahead, note=note, rank_zero_note="this process; its script ended")
        )

    def _unwind_stage(self) -> None:
        """Unwind rank zero's stage; if it cannot be (a C call that never returns), report and
        end this process after the grace period."""
        if self.job.interrupter.interrupt(GRACE_SECONDS):
            return
        error = self.job.context.error
        if error is not None:
            sys.stderr.write(f"ddpkit: {error}\n")
        sys.stderr.write(
            f"ddpkit: rank {self.job.rank_zero.rank}'s main thread did not return within "
            f"{GRACE_SECONDS:g} s (it is inside a call that cannot be interrupted); ending this "
            f"process.\n"
        )
        sys.stderr.flush()
        self.job.close()
        signum = self.job.context.interrupted
        os._exit(128 + signum if signum is not None else 1)

    def _silent_after_stall(self) -> Rank | None:
        """A child that has not answered the stall alarm long after rank zero did: it never
        arrived, and is stuck where even its watchdog thread cannot run."""
        since = self.job.rank_zero.stall_at
        if since is None or time.monotonic() - since < STALL_GATHER_SECONDS:
            return None
        return next((h for h in self.job.context.ranks if h.poll() is None), None)
