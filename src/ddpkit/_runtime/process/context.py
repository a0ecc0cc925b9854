"""One job's processes from start to end (torch elastic's ``PContext``): start them, poll them
all-or-nothing, end them once, and say each one's fate.

Whoever first sees the end of a job — a poll loop or a supervisor thread (a rank failed, a
signal came) or rank zero's own stage (it raised) — calls :meth:`ProcessContext.conclude` with
the :data:`Outcome`. The first call *claims* the job: it ends every process still running
(:meth:`ProcessContext.close`), records what the launching process must raise, and *settles*.
Every later call returns False, and anyone who needs the end waits for it
(:meth:`ProcessContext.settled`). So a job ends once, in one way, however many threads see it
end.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ddpkit._runtime.process.ending import (
    GRACE_SECONDS,
    POLL_SECONDS,
    Ending,
    RecordOf,
    choose_root,
    end_job,
    fates,
    first_failure,
)
from ddpkit._runtime.process.proc import Proc, Rank
from ddpkit._runtime.process.signals import SignalFlag, exit_exception
from ddpkit._runtime.process.starter import start_in_lifetime_thread
from ddpkit._runtime.ranks._stall import StallReport
from ddpkit.errors import ChildFailedError, RankFailure


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


@dataclass(frozen=True)
class TimedOut:
    """The job ran past its ``timeout`` (s): an isolated test's processes."""

    timeout: float


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


def _note_ends(ranks: Sequence[Rank]) -> list[Rank]:
    """Note when each rank is seen to have ended; those seen now."""
    ended = [r for r in ranks if r.ended_at is None and r.poll() is not None]
    for r in ended:
        r.ended_at = time.time()
    return ended


class ProcessContext:
    """The processes of one job (``what`` names it in reports: "DDP (spawn launcher)"), what
    each rank left (``record_of``: its error file), and, for the subprocess launcher, rank zero
    (the supervising process is a rank itself); see the module docstring."""

    def __init__(
        self, what: str, record_of: RecordOf, *, rank_zero: RankZero | None = None
    ) -> None:
        self.what = what
        self.record_of = record_of
        self.rank_zero = rank_zero
        #: every process started or adopted so far, in that order
        self.ranks: list[Rank] = []
        #: what the launching process raises; None until settled, and for a script that raised
        self.error: BaseException | None = None
        #: the signal that ended the job, when one did
        self.interrupted: int | None = None
        #: how the job's processes were ended, the first time they were (None: not yet)
        self.ending: Ending | None = None
        self._lock = threading.Lock()
        self._claimed = False
        self._settled = threading.Event()

    # -- start -------------------------------------------------------------------------------

    def start(
        self,
        starters: Iterable[tuple[int, Callable[[], Proc]]],
        *,
        failed: str = "after rank 0 could not start all",
    ) -> None:
        """Start a process per ``(rank, starter)``, from the process's lifetime thread (a
        rank's parent-death signal follows the thread that started it); each joins
        :attr:`ranks` as it starts, so that a start that fails ends those started (``failed``
        says why, in their fates) and raises."""

        def start_each() -> None:
            for rank, starter in starters:
                self.ranks.append(Rank(rank, starter()))

        try:
            start_in_lifetime_thread(start_each)
        except BaseException:
            self.close(failed)
            raise

    def adopt(self, rank: int, proc: Proc, log: Path | None = None) -> None:
        """A process started elsewhere (forked by the zygote, or started for a test) joins."""
        self.ranks.append(Rank(rank, proc, log))

    def pids(self) -> dict[int, int]:
        """Each rank's pid (torch elastic's name)."""
        return {r.rank: r.pid for r in self.ranks}

    # -- poll --------------------------------------------------------------------------------

    def look(self, signals: SignalFlag) -> Outcome | None:
        """Wait up to :data:`~.ending.POLL_SECONDS` (a signal wakes it), then look once: an
        interrupt, or the first rank that failed; None while nothing has ended the job."""
        if (signum := signals.wait(POLL_SECONDS)) is not None:
            return Interrupted(signum)
        failed = first_failure(self.ranks, self.record_of)
        return None if failed is None else ChildFailed(failed)

    def watch(
        self,
        idle: Callable[[float], int | None],
        *,
        failed: Callable[[Rank], bool] | None = None,
        fail_grace: float = 0.0,
        timeout: float | None = None,
    ) -> Interrupted | ChildFailed | TimedOut | None:
        """Poll all or nothing until every rank has exited (None, or the first that failed) or
        the job must end: ``fail_grace`` s after a rank was first seen failing (``failed``; by
        default, :func:`~.ending.first_failure`'s rule), at ``timeout`` s, or when ``idle``, the
        wait between two looks, returns a signal. Notes when each rank ended (``ended_at``)."""
        failing = failed or (lambda r: first_failure([r], self.record_of) is not None)
        deadline = None if timeout is None else time.monotonic() + timeout
        first: tuple[Rank, float] | None = None  # the first rank seen failing, and when
        while True:
            now = time.monotonic()
            ended = _note_ends(self.ranks)  # a rank seen ending before is not judged again
            looked = [r for r in self.ranks if r.ended_at is None or r in ended]
            if first is None and (rank := next(filter(failing, looked), None)) is not None:
                first = (rank, now)
            if all(r.ended_at is not None for r in self.ranks):
                return None if first is None else ChildFailed(first[0])
            if first is not None and now - first[1] >= fail_grace:
                return ChildFailed(first[0])
            if timeout is not None and deadline is not None and now >= deadline:
                return TimedOut(timeout)
            if (signum := idle(POLL_SECONDS)) is not None:
                return Interrupted(signum)

    def wait(self, signals: SignalFlag) -> BaseException | None:
        """Poll until every rank finished (None) or the job ended: what the launching process
        raises then."""
        outcome = self.watch(signals.wait)
        if outcome is None:
            return None
        assert not isinstance(outcome, TimedOut)  # no timeout was given
        self.conclude(outcome)
        error = self.settled()
        return error if error is not None else RuntimeError("launch ended unrecorded")

    # -- end ---------------------------------------------------------------------------------

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

    def settled(self) -> BaseException | None:
        """Once the job has ended: what the launching process raises."""
        self._settled.wait()
        return self.error

    def close(
        self, reason: str, root: Rank | None = None, *, grace: float = GRACE_SECONDS
    ) -> list[RankFailure]:
        """End every process of the job (:func:`~.ending.end_job`: SIGTERM, SIGKILL after
        ``grace`` s) and return each rank's fate, ``root`` first. A root cause that raised is
        ended too once its report is in, rather than left to finish exiting: its open
        connections keep the others' collectives waiting until its interpreter is gone."""
        ending = end_job(self.ranks, reason=reason, grace=grace)
        _note_ends(self.ranks)  # each one has exited
        if self.ending is None:  # the first end names the reason; a later one only mops up
            self.ending = ending
        return fates(self.ranks, root, self.record_of, ending)

    # -- the outcomes ------------------------------------------------------------------------

    def _interrupted(self, signum: int) -> None:
        """After SIGINT/SIGTERM ended every rank: one line per rank on stderr."""
        self.interrupted = signum
        name = signal.Signals(signum).name
        who = "the launcher" if self.rank_zero is None else f"rank {self.rank_zero.rank}"
        fates = self.close(f"after {who} received {name}")
        lines = [f"ddpkit: {name}: every rank of {self.what} ended:"]
        lines += [f"  {fate.line()}" for fate in fates]
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
        self.error = exit_exception(signum)

    def _child_failed(self, outcome: ChildFailed) -> None:
        rz = self.rank_zero
        root = choose_root(
            self.ranks,
            outcome.first,
            self.record_of,
            others_never_arrived=lambda: bool(rz and rz.stall and rz.stall.never_arrived),
            # A child the alarm ended may be gone before rank zero's own watchdog, still
            # waiting for every answer, has written its note: the report needs that note.
            others_reported=lambda: rz is None or rz.stall is not None,
        )
        if root is None:  # rank zero, this process, is the one that never arrived
            assert rz is not None and rz.stall is not None  # choose_root's contract
            fates = self.close(f"after rank {rz.rank} stalled")
            own = rz.line(f"this process; {rz.stall.note}", rz.stall.stack)
            self.error = ChildFailedError([own, *fates], what=self.what)
            return
        stalled = rz is not None and rz.stall is not None
        fates = self.close(
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
        fates = self.close(outcome.why)
        error = outcome.error
        if error is None:
            # The script's own traceback follows on stderr; say how the others ended first.
            sys.stderr.write("".join(f"ddpkit: {fate.line()}\n" for fate in fates))
            return
        # Rank zero is the root cause: keep its own exception and traceback, and say how each
        # other rank ended.
        for fate in fates:
            error.add_note(f"ddpkit: {fate.line()}")
        self.error = error
