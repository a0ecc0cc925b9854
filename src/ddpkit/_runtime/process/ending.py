"""How a job ends, for every supervisor ddpkit has: the subprocess and spawn launchers, and the
pytest plugin's parent of an isolated test.

The contract (after torch elastic's process context): the first rank that fails is the root
cause; every other process of the job is ended (:func:`end_job`: SIGTERM to each rank's process
group and to every process descended from a rank, then SIGKILL after a grace period); the report
names every rank's fate (:func:`fates`, in the words of :class:`~ddpkit.errors.RankFailure`), root
cause first. Who is to blame follows one order (:class:`Blame`): a rank that never arrived, then
one that failed on its own, then one still running outside any collective, ... and last one whose
collective only lost its peer. The launchers read it from the ranks' error files
(:func:`choose_root`), the test parent from the ranks' pytest reports and stacks
(:mod:`ddpkit.testing._rootcause`).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from ddpkit._runtime.process.proc import Rank
from ddpkit._runtime.ranks._errorfile import ErrorRecord, raised
from ddpkit._tracebacks import verbose
from ddpkit.errors import RankFailure
from ddpkit.utilities import _procs as procs

# The timing constants are importable too; __all__ leaves them out, as elsewhere in ddpkit,
# because ruff and tests/test_public_api.py sort SCREAMING_CASE names differently.

#: how long a rank has between SIGTERM and SIGKILL
GRACE_SECONDS = 3.0
#: how often a supervisor polls its ranks
POLL_SECONDS = 0.05
#: after a stall report, how long the other ranks get to send theirs
STALL_GATHER_SECONDS = 4.0
#: when the first failure seen is a rank whose collective lost its peer, how long the rank that
#: really went first has to show (its process is gone at once, so this is rarely waited out)
CONSEQUENCE_WAIT_SECONDS = 1.0
#: how long a process that is not a rank (a rank's own child) gets to go after SIGKILL
_REAP_SECONDS = 5.0

#: a rank's error file, read by rank number (None: it left none)
RecordOf = Callable[[int], ErrorRecord | None]


class Blame(IntEnum):
    """Where a rank stands when a job ends badly; the root cause is the rank lowest here (then
    the earliest, then the lowest rank)."""

    #: it never reached the rendezvous, or the collective the others wait in
    NEVER_ARRIVED = 0
    #: it raised or died on its own
    FAILED = 1
    #: still running at a stall or a timeout, outside any collective: the others wait for it
    OUTSIDE = 2
    #: still running at a timeout, where is unknown (it left no stacks)
    UNKNOWN = 3
    #: it failed because of another: its collective lost its peer, or it waits inside one
    CONSEQUENCE = 4
    #: ended by ddpkit after the root cause
    ENDED = 5
    #: it finished (passed, skipped)
    FINISHED = 6


def first_failure(handles: Sequence[Rank], record_of: RecordOf | None = None) -> Rank | None:
    """The lowest rank that exited with a non-zero status (or a signal), or that left an error
    report: a rank that raised is known as the root cause before its interpreter has finished
    exiting (which takes the better part of a second with torch loaded)."""
    return next((h for h in handles if _failed(h, record_of)), None)


def _failed(h: Rank, record_of: RecordOf | None) -> bool:
    """Exited with a non-zero status or a signal, or still running with its report already in."""
    code = h.poll()
    if code is not None:
        return code != 0
    return record_of is not None and record_of(h.rank) is not None


def _blame(h: Rank, record_of: RecordOf) -> Blame:
    """A rank's place in the order of blame, from the error file it left."""
    record = record_of(h.rank)
    if record is not None and record.kind == "peer_loss":
        return Blame.CONSEQUENCE
    if record is not None and record.kind == "stall" and record.never_arrived:
        return Blame.NEVER_ARRIVED
    return Blame.FAILED


def choose_root(
    handles: Sequence[Rank],
    first: Rank,
    record_of: RecordOf,
    *,
    others_never_arrived: Callable[[], bool] = lambda: False,
    others_reported: Callable[[], bool] = lambda: True,
    gather: float = STALL_GATHER_SECONDS,
) -> Rank | None:
    """The root cause, given the first rank seen failing.

    A rank that raised or died on its own comes before one whose collective only lost its peer
    (that one is waited for up to :data:`CONSEQUENCE_WAIT_SECONDS`: the rank that went first
    shows up at once, as its process is gone). A stall report: wait (up to ``gather`` s) for
    every rank to report, then the lowest rank that never arrived; a rank that did not report
    at all is one (it is stuck where even its watchdog thread cannot run). ``None`` when the rank
    that never arrived is not among ``handles`` (``others_never_arrived``: rank zero of the
    subprocess launcher, which is the supervising process itself; ``others_reported``: its own
    watchdog has written its answer to the alarm, which it does only once every other rank
    answered).
    """
    record = record_of(first.rank)
    if record is not None and record.kind == "stall":
        return _stalled_root(
            handles, first, record_of, others_never_arrived, others_reported, gather
        )
    deadline = time.monotonic() + CONSEQUENCE_WAIT_SECONDS
    while True:
        # The failed rank first in the order of blame (the lowest rank first within a place):
        # one that failed on its own before one that only lost a peer.
        failed = [h for h in handles if _failed(h, record_of)]
        root = min(failed, key=lambda h: (_blame(h, record_of), h.rank), default=first)
        if _blame(root, record_of) is not Blame.CONSEQUENCE or time.monotonic() >= deadline:
            return root
        time.sleep(POLL_SECONDS)


def _stalled_root(
    handles: Sequence[Rank],
    first: Rank,
    record_of: RecordOf,
    others_never_arrived: Callable[[], bool],
    others_reported: Callable[[], bool],
    gather: float,
) -> Rank | None:
    deadline = time.monotonic() + gather
    while time.monotonic() < deadline and (
        any(h.poll() is None for h in handles) or not others_reported()
    ):
        time.sleep(POLL_SECONDS)
    ordered = sorted(handles, key=lambda h: h.rank)
    never = next((h for h in ordered if _blame(h, record_of) is Blame.NEVER_ARRIVED), None)
    if never is not None or others_never_arrived():
        return never
    return next((h for h in ordered if h.poll() is None), first)


@dataclass(frozen=True)
class Ending:
    """What :func:`end_job` did, and why: the pids it sent SIGTERM (those still running then),
    and the ones it then had to SIGKILL."""

    reason: str
    grace: float
    terminated: frozenset[int] = frozenset()
    killed: frozenset[int] = frozenset()

    def note(self, pid: int) -> str:
        """How ddpkit ended ``pid``, in words; '' when it ended on its own."""
        if pid in self.killed:
            if pid not in self.terminated or self.grace <= 0:
                return f"killed by ddpkit (SIGKILL) {self.reason}"
            return (
                f"did not end within {self.grace:g} s of SIGTERM; killed by ddpkit (SIGKILL) "
                f"{self.reason}"
            )
        if pid in self.terminated:
            return f"ended by ddpkit (SIGTERM) {self.reason}"
        return ""


def end_job(handles: Sequence[Rank], *, reason: str, grace: float = GRACE_SECONDS) -> Ending:
    """End every process of the job: each rank's process group and, where ``/proc`` shows them,
    every process descended from a rank or in a session or group one leads (a rank's child that
    left its group, one handed to init when its parent died). SIGTERM, then SIGKILL what still
    runs after ``grace`` s; returns once every rank has exited (and its other processes are gone,
    or a few seconds passed). Each process gets each signal once: a rank's SIGTERM handler is
    not interrupted by a second one."""
    own = {h.pid for h in handles}
    table = procs.process_table()
    others = procs.tree(own, table) - own - {os.getpid()}
    running = {h.pid for h in handles if h.poll() is None}
    # A running rank leads its own group: the group's signal reaches these with it.
    in_a_group = {pid for pid in others if table[pid].pgid in running}
    for h in handles:
        h.send_signal(signal.SIGTERM)  # a rank that has exited is skipped
    for pid in others - in_a_group:
        procs.send_signal(pid, signal.SIGTERM)
    _wait(handles, others, time.monotonic() + grace)
    killed = {h.pid for h in handles if h.poll() is None}
    killed |= {pid for pid in others if procs.is_running(pid)}
    for h in handles:
        h.send_signal(signal.SIGKILL)
    for pid in killed & others:  # a second SIGKILL to a group member is harmless
        procs.send_signal(pid, signal.SIGKILL)
    _wait(handles, others, None)
    # What the job started while we looked (a rank's child forked after the scan) goes too.
    late = procs.tree(own) - {os.getpid()}
    procs.end_processes(late, grace=0)
    killed |= late
    return Ending(reason, grace, frozenset(running | others), frozenset(killed))


def _wait(handles: Sequence[Rank], others: set[int], deadline: float | None) -> None:
    """Until every rank has exited and no other process runs, or ``deadline`` (None: until the
    ranks have exited, and at most a few seconds for the others, which are not ours to reap)."""
    reap_until = time.monotonic() + _REAP_SECONDS
    while True:
        ranks_done = all(h.poll() is not None for h in handles)
        others_done = not any(procs.is_running(p) for p in others)
        now = time.monotonic()
        if ranks_done and (others_done or (deadline is None and now >= reap_until)):
            return
        if deadline is not None and now >= deadline:
            return
        time.sleep(POLL_SECONDS)


def fates(
    handles: Sequence[Rank],
    root: Rank | None,
    record_of: RecordOf,
    ending: Ending,
) -> list[RankFailure]:
    """Each rank's fate once the job has ended, the root cause first (when it is one of
    ``handles``), then by rank."""
    failures: list[RankFailure] = []
    every_frame = verbose()
    for h in sorted(handles, key=lambda h: (h is not root, h.rank)):
        code = h.poll()
        record = record_of(h.rank) if code != 0 else None
        # Only the root cause's traceback is shown: the others' say that it went away.
        shown = record if (record is not None and h is root) else None
        failures.append(
            RankFailure(
                rank=h.rank,
                pid=h.pid,
                exitcode=code,
                traceback=shown.shown_traceback(every_frame) if shown is not None else "",
                note=_note(ending, h.pid, h is root, record, code),
                where=shown.where if shown is not None else "",
                folded=shown is not None and bool(shown.folded) and not every_frame,
            )
        )
    return failures


def _note(
    ending: Ending, pid: int, root: bool, record: ErrorRecord | None, code: int | None
) -> str:
    """How one rank ended, in words ('' leaves it to the exit status)."""
    ended = pid in ending.terminated
    if root and record is not None and record.kind in ("exception", "peer_loss"):
        return raised(record) if ended else f"{raised(record)} (exit code {code})"
    if root and record is not None and record.note:
        return record.note
    if root and ended:
        return f"never arrived and did not answer the stall alarm; ended by ddpkit {ending.reason}"
    if ended or pid in ending.killed:
        return ending.note(pid)
    if record is not None and record.note:
        return record.note
    return "had already finished (exit code 0)" if code == 0 else ""
