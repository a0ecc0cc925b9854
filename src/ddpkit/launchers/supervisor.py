"""The one place where a job ends.

Whoever first sees the end of a job — a supervisor thread or loop (a rank failed, a signal came)
or rank zero's own stage (it raised) — calls :meth:`Supervisor.conclude` with the
:data:`Outcome`. The first call *claims* the job: it ends every rank still running, records what
the launching process must raise, and *settles*. Every later call returns False, and anyone who
needs the end waits for it (:meth:`Supervisor.wait`). So a job ends once, in one way, however
many threads see it end.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from ddpkit._runtime.process.ending import RecordOf, choose_root, end_all
from ddpkit._runtime.process.proc import Rank
from ddpkit._runtime.process.signals import exit_exception
from ddpkit.errors import ChildFailedError, RankFailure
from ddpkit.launchers.report import report_interrupt
from ddpkit.ranks.stall import StallReport

__all__ = [
    "ChildFailed",
    "Interrupted",
    "Outcome",
    "RankZero",
    "RankZeroFailed",
    "Supervisor",
]


@dataclass(frozen=True)
class Interrupted:
    """SIGINT or SIGTERM reached the launching process."""

    signum: int


@dataclass(frozen=True)
class ChildFailed:
    """A rank the launcher started failed (or ended when it must not have). ``note`` replaces
    the root cause's own description; ``rank_zero_note`` adds a line for rank zero."""

    first: Rank
    note: str = ""
    rank_zero_note: str = ""


@dataclass(frozen=True)
class RankZeroFailed:
    """Rank zero itself failed: its stage raised ``error``, or its script raised (``error`` is
    None: the script's own traceback is on its way to stderr). ``why`` ends the other ranks'
    notes: "after rank 0 failed (RuntimeError: boom)"."""

    error: BaseException | None
    why: str


Outcome = Interrupted | ChildFailed | RankZeroFailed


@dataclass
class RankZero:
    """Rank zero of the subprocess launcher: the supervising process is a rank itself."""

    rank: int
    stage: str = ""
    #: what its stall watchdog said, when the stall alarm went round
    stall: StallReport | None = None
    stall_at: float | None = None
    pid: int = field(default_factory=os.getpid)

    def line(self, note: str, traceback: str = "") -> RankFailure:
        return RankFailure(
            rank=self.rank, pid=self.pid, exitcode=None, traceback=traceback, note=note
        )


class Supervisor:
    """The ranks one launch started; see the module docstring."""

    def __init__(
        self,
        handles: Sequence[Rank],  # may grow while the ranks start
        record_of: RecordOf,
        *,
        what: str,
        rank_zero: RankZero | None = None,
    ) -> None:
        # Kept as given: a launcher may add to it while its ranks start.
        self.handles = handles
        self.record_of = record_of
        self.what = what
        self.rank_zero = rank_zero
        #: what the launching process raises; None until settled, and for a script that raised
        self.error: BaseException | None = None
        #: the signal that ended the job, when one did
        self.interrupted: int | None = None
        self._lock = threading.Lock()
        self._claimed = False
        self._settled = threading.Event()

    @property
    def claimed(self) -> bool:
        return self._claimed

    def conclude(self, outcome: Outcome) -> bool:
        """End the job with ``outcome``, unless someone else already did (then False)."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
        try:
            if isinstance(outcome, Interrupted):
                self._interrupted(outcome.signum)
            elif isinstance(outcome, ChildFailed):
                self._child_failed(outcome)
            else:
                self._rank_zero_failed(outcome)
        finally:
            self._settled.set()
        return True

    def wait(self) -> BaseException | None:
        """Once settled: what the launching process raises."""
        self._settled.wait()
        return self.error

    def end_all(self, reason: str, root: Rank | None = None) -> list[RankFailure]:
        return end_all(self.handles, root, self.record_of, reason=reason)

    # -- the outcomes ----------------------------------------------------------------------------

    def _who(self) -> str:
        return "the launcher" if self.rank_zero is None else f"rank {self.rank_zero.rank}"

    def _interrupted(self, signum: int) -> None:
        self.interrupted = signum
        name = signal.Signals(signum).name
        fates = self.end_all(f"after {self._who()} received {name}")
        report_interrupt(signum, self.what, fates)
        self.error = exit_exception(signum)

    def _child_failed(self, outcome: ChildFailed) -> None:
        rz = self.rank_zero
        root = choose_root(
            self.handles,
            outcome.first,
            self.record_of,
            others_never_arrived=lambda: bool(rz and rz.stall and rz.stall.never_arrived),
            # A child the alarm ended may be gone before rank zero's own watchdog, still
            # waiting for every answer, has written its note: the report needs that note.
            others_reported=lambda: rz is None or rz.stall is not None,
        )
        if root is None:  # rank zero, this process, is the one that never arrived
            assert rz is not None and rz.stall is not None  # choose_root's contract
            fates = self.end_all(f"after rank {rz.rank} stalled")
            own = rz.line(f"this process; {rz.stall.note}", rz.stall.stack)
            self.error = ChildFailedError([own, *fates], what=self.what)
            return
        stalled = rz is not None and rz.stall is not None
        fates = self.end_all(
            "after the stall alarm" if stalled else f"after rank {root.rank} failed", root
        )
        note = outcome.note
        if not note and rz is not None and root.poll() == 0:
            note = (
                f"exited with code 0 while rank {rz.rank} was still in {rz.stage or 'a stage'}: "
                f"every rank must make the same Trainer calls (a call under "
                f"`if trainer.is_global_zero:` runs on rank 0 only)"
            )
        if note:
            old = fates[0]
            fates[0] = RankFailure(rank=old.rank, pid=old.pid, exitcode=old.exitcode, note=note)
        if rz is not None and rz.stall is not None:
            fates.insert(1, rz.line(f"this process; {rz.stall.note}"))
        elif rz is not None and outcome.rank_zero_note:
            fates.insert(1, rz.line(outcome.rank_zero_note))
        self.error = ChildFailedError(fates, what=self.what)

    def _rank_zero_failed(self, outcome: RankZeroFailed) -> None:
        fates = self.end_all(outcome.why)
        error = outcome.error
        if error is None:
            # The script's own traceback follows on stderr; say how the others ended first.
            import sys

            sys.stderr.write("".join(f"ddpkit: {fate.line()}\n" for fate in fates))
            return
        # Rank zero is the root cause: keep its own exception and traceback, and say how each
        # other rank ended.
        for fate in fates:
            error.add_note(f"ddpkit: {fate.line()}")
        self.error = error
