"""How a job ends: which rank is the root cause, and ending every other rank.

The contract (after torch elastic's process context): the first rank that fails is the root
cause; the others are ended (SIGTERM to the rank's process group, then SIGKILL after a grace
period); the report names every rank's fate, root cause first. A rank that failed on its own
comes before one whose collective only lost its peer, and a stall's root cause is a rank that
never arrived (see :mod:`ddpkit.ranks.stall`).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ddpkit.errors import RankFailure
from ddpkit.launchers.handles import RankHandle
from ddpkit.ranks.errorfile import ErrorRecord, raised

__all__ = [
    "GRACE_SECONDS",
    "POLL_SECONDS",
    "RecordOf",
    "choose_root",
    "end_all",
    "first_failure",
]

#: how long a rank has between SIGTERM and SIGKILL
GRACE_SECONDS = 3.0
#: how often a supervisor polls its ranks
POLL_SECONDS = 0.05
#: after a stall report, how long the other ranks get to send theirs
STALL_GATHER_SECONDS = 4.0
#: when the first failure seen is a rank whose collective lost its peer, how long the rank that
#: really went first has to show (its process is gone at once, so this is rarely waited out)
CONSEQUENCE_WAIT_SECONDS = 1.0

#: a rank's error file, read by rank number (None: it left none)
RecordOf = Callable[[int], ErrorRecord | None]


def first_failure(
    handles: Sequence[RankHandle], record_of: RecordOf | None = None
) -> RankHandle | None:
    """The lowest rank that exited with a non-zero status (or a signal), or that left an error
    report: a rank that raised is known as the root cause before its interpreter has finished
    exiting (which takes the better part of a second with torch loaded)."""
    return next((h for h in handles if _failed(h, record_of)), None)


def _failed(h: RankHandle, record_of: RecordOf | None) -> bool:
    """Exited with a non-zero status or a signal, or still running with its report already in."""
    code = h.poll()
    if code is not None:
        return code != 0
    return record_of is not None and record_of(h.rank) is not None


def _consequence(h: RankHandle, record_of: RecordOf) -> bool:
    record = record_of(h.rank)
    return record is not None and record.kind == "peer_loss"


def _candidates(handles: Sequence[RankHandle], record_of: RecordOf) -> list[RankHandle]:
    """Every failed rank, those that failed on their own first (lowest rank first), then those
    that only lost a peer."""
    failed = [h for h in handles if _failed(h, record_of)]
    return sorted(failed, key=lambda h: (_consequence(h, record_of), h.rank))


def choose_root(
    handles: Sequence[RankHandle],
    first: RankHandle,
    record_of: RecordOf,
    *,
    others_never_arrived: Callable[[], bool] = lambda: False,
    gather: float = STALL_GATHER_SECONDS,
    peer_loss_wait: float = CONSEQUENCE_WAIT_SECONDS,
) -> RankHandle | None:
    """The root cause, given the first rank seen failing.

    A rank that raised or died on its own comes before one whose collective only lost its peer
    (that one is waited for up to ``peer_loss_wait`` s: the rank that went first shows up at
    once, as its process is gone). A stall report: wait (up to ``gather`` s) for every rank to
    report, then the lowest rank that never arrived; a rank that did not report at all is one
    (it is stuck where even its watchdog thread cannot run). ``None`` when the rank that never
    arrived is not among ``handles`` (``others_never_arrived``: rank zero of the subprocess
    launcher, which is the supervising process itself).
    """
    record = record_of(first.rank)
    if record is not None and record.kind == "stall":
        return _stalled_root(handles, first, record_of, others_never_arrived, gather)
    deadline = time.monotonic() + peer_loss_wait
    while True:
        candidates = _candidates(handles, record_of) or [first]
        if not _consequence(candidates[0], record_of) or time.monotonic() >= deadline:
            return candidates[0]
        time.sleep(POLL_SECONDS)


def _stalled_root(
    handles: Sequence[RankHandle],
    first: RankHandle,
    record_of: RecordOf,
    others_never_arrived: Callable[[], bool],
    gather: float,
) -> RankHandle | None:
    deadline = time.monotonic() + gather
    while any(h.poll() is None for h in handles) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    ordered = sorted(handles, key=lambda h: h.rank)
    for h in ordered:
        r = record_of(h.rank)
        if r is not None and r.kind == "stall" and r.never_arrived:
            return h
    if others_never_arrived():
        return None
    for h in ordered:
        if h.poll() is None:
            return h
    return first


def end_all(
    handles: Sequence[RankHandle],
    root: RankHandle | None,
    record_of: RecordOf,
    *,
    reason: str = "after the root cause failed",
    grace: float = GRACE_SECONDS,
) -> list[RankFailure]:
    """End every rank still running (SIGTERM to its process group, then SIGKILL after
    ``grace``); return each rank's fate, the root cause first (when it is one of ``handles``).

    A root cause that raised is ended too once its report is in, rather than left to finish
    exiting: its open connections keep the others' collectives waiting until its interpreter is
    gone, the better part of a second with torch loaded.
    """
    ended_by_us: set[int] = set()
    for h in handles:
        if h.poll() is None:
            ended_by_us.add(h.rank)
            h.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(h.poll() is None for h in handles) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    killed: set[int] = set()
    for h in handles:
        if h.poll() is None:
            killed.add(h.rank)
            h.send_signal(signal.SIGKILL)
    for h in handles:
        while h.poll() is None:
            time.sleep(POLL_SECONDS)
    failures: list[RankFailure] = []
    for h in sorted(handles, key=lambda h: (h is not root, h.rank)):
        code = h.poll()
        record = record_of(h.rank) if code != 0 else None
        fate = _Fate(reason, grace, ended=h.rank in ended_by_us, killed=h.rank in killed)
        failures.append(
            RankFailure(
                rank=h.rank,
                pid=h.pid,
                exitcode=code,
                traceback=record.traceback if (record is not None and h is root) else "",
                note=fate.note(h is root, record, code),
            )
        )
    return failures


@dataclass(frozen=True)
class _Fate:
    """How one rank ended, in words."""

    reason: str
    grace: float
    ended: bool  # ddpkit sent it SIGTERM
    killed: bool  # and then SIGKILL

    def note(self, root: bool, record: ErrorRecord | None, code: int | None) -> str:
        if root and record is not None and record.kind in ("exception", "peer_loss"):
            return raised(record) if self.ended else f"{raised(record)} (exit code {code})"
        if root and record is not None and record.note:
            return record.note
        if root and self.ended:
            return (
                f"never arrived and did not answer the stall alarm; ended by ddpkit {self.reason}"
            )
        if self.killed:
            return (
                f"did not end within {self.grace:g} s of SIGTERM; killed by ddpkit (SIGKILL) "
                f"{self.reason}"
            )
        if self.ended:
            return f"ended by ddpkit (SIGTERM) {self.reason}"
        if record is not None and record.note:
            return record.note
        return "had already finished (exit code 0)" if code == 0 else ""
