"""All-or-nothing supervision of the ranks a launcher started.

The contract (after torch elastic's process context): poll every rank; the first that fails is
the root cause; the others are ended (SIGTERM to the rank's process group, then SIGKILL after a
grace period); the report names every rank's fate, root cause first.

A failing rank leaves its traceback in an error file (JSON, in the launcher's private 0700
directory, named by ``DDPKIT_ERROR_FILE``). A stall is reported the same way, with the rank's stack
in place of a traceback: every rank reports within moments of the alarm, so the supervisor waits
for their reports and makes a rank that never arrived the root cause, whichever exited first.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ddpkit.errors import RankFailure
from ddpkit.launchers.scratch import write_private

__all__ = [
    "ErrorRecord",
    "PopenHandle",
    "ProcessHandle",
    "RankHandle",
    "choose_root",
    "end_all",
    "first_failure",
    "is_peer_loss",
    "raised",
    "read_error_file",
    "report_interrupt",
    "report_rank_failure",
    "write_error_file",
]

#: the variable that tells a rank where to leave its error report
ENV_ERROR_FILE = "DDPKIT_ERROR_FILE"
#: how long a rank has between SIGTERM and SIGKILL
GRACE_SECONDS = 3.0
#: how often the supervisor polls its ranks
POLL_SECONDS = 0.05
#: after a stall report, how long the other ranks get to send theirs
STALL_GATHER_SECONDS = 4.0
#: when the first failure seen only lost its peer, how long the rank that went first has to show
PEER_LOSS_SECONDS = 1.0


def is_peer_loss(exc: BaseException) -> bool:
    """True for the error a collective raises because another rank went away (its connection
    closed, or the collective timed out waiting for it): a consequence, not a root cause."""
    import torch.distributed as dist

    seen: BaseException | None = exc
    for _ in range(8):  # the exception, its cause, its context...
        if seen is None:
            return False
        if isinstance(seen, dist.DistError):
            return True
        if isinstance(seen, RuntimeError) and "gloo" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class RankHandle(Protocol):
    rank: int

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None:
        """The exit code (negative: the signal), or None while running."""

    def send_signal(self, sig: int) -> None:
        """Signal the rank and its own children (its process group) while it runs."""


def _signal_group(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid:  # the rank leads its own process group
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


@dataclass
class PopenHandle:
    """A rank started with ``subprocess.Popen`` (it leads its own process group)."""

    rank: int
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def send_signal(self, sig: int) -> None:
        # poll() first: once the rank is reaped its pid may belong to someone else.
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, sig)


@dataclass
class ProcessHandle:
    """A ``multiprocessing.Process`` (spawn); the rank moves to its own process group at start."""

    rank: int
    proc: Any

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def poll(self) -> int | None:
        code = self.proc.exitcode
        return None if code is None else int(code)

    def send_signal(self, sig: int) -> None:
        if self.proc.exitcode is None:
            _signal_group(self.proc.pid, sig)


@dataclass(frozen=True)
class ErrorRecord:
    """What a failing rank left in its error file."""

    pid: int
    traceback: str
    #: "exception" (it raised), "peer_loss" (it raised because another rank went away) or
    #: "stall" (the stall alarm ended it; ``traceback`` is its stack)
    kind: str = "exception"
    note: str = ""
    never_arrived: bool = False


def write_error_file(
    path: str | os.PathLike[str],
    traceback_text: str,
    *,
    kind: str = "exception",
    note: str = "",
    never_arrived: bool = False,
) -> None:
    """Called in a failing rank: leave its report for the supervisor (atomic rename)."""
    record = {
        "pid": os.getpid(),
        "traceback": traceback_text,
        "kind": kind,
        "note": note,
        "never_arrived": never_arrived,
    }
    write_private(path, json.dumps(record).encode())


def report_rank_failure(path: str | None, exc: BaseException) -> None:
    """In a rank whose stage raised ``exc``: leave its traceback in its error file (when the
    launcher gave one), marked as a lost peer when another rank's end caused it. A directory
    that is already gone means the launcher has ended: there is no one left to tell."""
    if not path:
        return
    kind = "peer_loss" if is_peer_loss(exc) else "exception"
    with contextlib.suppress(OSError):
        write_error_file(path, "".join(traceback.format_exception(exc)), kind=kind)


def report_interrupt(signum: int, what: str, fates: Sequence[RankFailure]) -> None:
    """After SIGINT/SIGTERM ended every rank: one line per rank on stderr."""
    name = signal.Signals(signum).name
    lines = [f"ddpkit: {name}: every rank of {what} ended:"]
    lines += [f"  {fate.line()}" for fate in fates]
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


def read_error_file(path: str | os.PathLike[str]) -> ErrorRecord | None:
    try:
        data = json.loads(Path(path).read_text())
        return ErrorRecord(
            pid=int(data["pid"]),
            traceback=str(data["traceback"]),
            kind=str(data.get("kind", "exception")),
            note=str(data.get("note", "")),
            never_arrived=bool(data.get("never_arrived", False)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def first_failure(
    handles: Sequence[RankHandle], record_of: Callable[[int], ErrorRecord | None] | None = None
) -> RankHandle | None:
    """The lowest rank that exited with a non-zero status (or a signal), or that left an error
    report: a rank that raised is known as the root cause before its interpreter has finished
    exiting (which takes the better part of a second with torch loaded)."""
    return next((h for h in handles if _failed(h, record_of)), None)


def _failed(h: RankHandle, record_of: Callable[[int], ErrorRecord | None] | None) -> bool:
    """Exited with a non-zero status or a signal, or still running with its report already in."""
    code = h.poll()
    if code is not None:
        return code != 0
    return record_of is not None and record_of(h.rank) is not None


def raised(record: ErrorRecord) -> str:
    """'raised RuntimeError: boom', from the last line of a traceback."""
    lines = [line for line in record.traceback.strip().splitlines() if line.strip()]
    return f"raised {lines[-1].strip()[:300]}" if lines else "raised an exception"


def _consequence(h: RankHandle, record_of: Callable[[int], ErrorRecord | None]) -> bool:
    record = record_of(h.rank)
    return record is not None and record.kind == "peer_loss"


def _candidates(
    handles: Sequence[RankHandle], record_of: Callable[[int], ErrorRecord | None]
) -> list[RankHandle]:
    """Every failed rank, those that failed on their own first (lowest rank first), then those
    that only lost a peer."""
    failed = [h for h in handles if _failed(h, record_of)]
    return sorted(failed, key=lambda h: (_consequence(h, record_of), h.rank))


def choose_root(
    handles: Sequence[RankHandle],
    first: RankHandle,
    record_of: Callable[[int], ErrorRecord | None],
    *,
    others_never_arrived: Callable[[], bool] = lambda: False,
    gather: float = STALL_GATHER_SECONDS,
    peer_loss_wait: float = PEER_LOSS_SECONDS,
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
    record_of: Callable[[int], ErrorRecord | None],
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
    record_of: Callable[[int], ErrorRecord | None],
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
        assert code is not None
        record = record_of(h.rank) if code != 0 else None
        if h is root and record is not None and record.kind in ("exception", "peer_loss"):
            note = raised(record)
            if h.rank not in ended_by_us:
                note += f" (exit code {code})"
        elif h is root and record is not None and record.note:
            note = record.note
        elif h is root and h.rank in ended_by_us:
            note = f"never arrived and did not answer the stall alarm; ended by ddpkit {reason}"
        elif h.rank in killed:
            note = f"did not end within {grace:g} s of SIGTERM; killed by ddpkit (SIGKILL) {reason}"
        elif h.rank in ended_by_us:
            note = f"ended by ddpkit (SIGTERM) {reason}"
        elif record is not None and record.note:
            note = record.note
        elif code == 0:
            note = "had already finished (exit code 0)"
        else:
            note = ""
        failures.append(
            RankFailure(
                rank=h.rank,
                pid=h.pid,
                exitcode=code,
                traceback=record.traceback if (record is not None and h is root) else "",
                note=note,
            )
        )
    return failures
