"""The one poll of a job's processes (``ProcessContext.watch``), which the launchers and the
test parent share, on scripted processes: all or nothing, a failure after its grace period, a
timeout, a signal."""

from __future__ import annotations

from dataclasses import dataclass

from ddpkit._runtime.process.context import ChildFailed, Interrupted, ProcessContext, TimedOut
from ddpkit._runtime.process.proc import Rank


@dataclass
class Scripted:
    """A process whose exit status shows after ``polls`` looks (``code`` None: never)."""

    pid: int
    code: int | None
    polls: int = 0

    def poll(self) -> int | None:
        self.polls -= 1
        return self.code if self.polls < 0 else None


def context(*procs: Scripted) -> ProcessContext:
    ctx = ProcessContext("a job", lambda rank: None)
    for rank, proc in enumerate(procs):
        ctx.adopt(rank, proc)
    return ctx


def no_wait(seconds: float) -> None:
    return None


def test_every_rank_finished() -> None:
    ctx = context(Scripted(10, 0, polls=3), Scripted(11, 0))
    assert ctx.watch(no_wait) is None
    assert all(r.ended_at is not None for r in ctx.ranks)


def test_a_failure_ends_the_job_at_once_without_a_grace_period() -> None:
    ctx = context(Scripted(10, None), Scripted(11, 1, polls=2), Scripted(12, -9))
    outcome = ctx.watch(no_wait)
    assert isinstance(outcome, ChildFailed) and outcome.first.rank == 2
    assert ctx.ranks[0].ended_at is None


def test_with_a_grace_period_the_others_may_end_on_their_own() -> None:
    ctx = context(Scripted(10, 0, polls=5), Scripted(11, 3))
    outcome = ctx.watch(no_wait, fail_grace=60.0)
    # Every rank ended: the job is over, and the first failure is still said.
    assert isinstance(outcome, ChildFailed) and outcome.first.rank == 1
    assert all(r.ended_at is not None for r in ctx.ranks)


def test_what_counts_as_a_failure_is_the_callers() -> None:
    ctx = context(Scripted(10, None), Scripted(11, 0))

    def failed(r: Rank) -> bool:
        return r.poll() is not None  # an exit of any kind (a test that was skipped)

    outcome = ctx.watch(no_wait, failed=failed)
    assert isinstance(outcome, ChildFailed) and outcome.first.rank == 1


def test_a_timeout() -> None:
    ctx = context(Scripted(10, None))
    assert ctx.watch(no_wait, timeout=0.05) == TimedOut(0.05)


def test_a_signal_while_waiting() -> None:
    ctx = context(Scripted(10, None))
    assert ctx.watch(lambda seconds: 15) == Interrupted(15)
