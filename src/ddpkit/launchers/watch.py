"""All-or-nothing supervision of the ranks a launcher started.

The contract (after torch elastic's process context): poll every rank; the first that fails is
the root cause; the others are ended (SIGTERM, then SIGKILL after a grace period); the report
names every rank's fate, root cause first.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ddpkit.errors import RankFailure

__all__ = [
    "PopenHandle",
    "ProcessHandle",
    "RankHandle",
    "end_all",
    "read_error_file",
    "write_error_file",
]

GRACE_SECONDS = 3.0
POLL_SECONDS = 0.05


class RankHandle(Protocol):
    rank: int

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None:
        """The exit code (negative: the signal), or None while running."""

    def send_signal(self, sig: int) -> None: ...


@dataclass
class PopenHandle:
    rank: int
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def send_signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)


@dataclass
class ProcessHandle:
    """A ``multiprocessing.Process`` (spawn)."""

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
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)


def write_error_file(path: str | os.PathLike[str], traceback_text: str) -> None:
    """Called in a failing rank: leave its traceback for the supervisor (private temp dir)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump({"pid": os.getpid(), "traceback": traceback_text}, fh)
    os.replace(tmp, path)


def read_error_file(path: str | os.PathLike[str]) -> str:
    try:
        return str(json.loads(Path(path).read_text())["traceback"])
    except (OSError, ValueError, KeyError):
        return ""


def first_failure(handles: Sequence[RankHandle]) -> RankHandle | None:
    for h in handles:
        code = h.poll()
        if code is not None and code != 0:
            return h
    return None


def end_all(
    handles: Sequence[RankHandle],
    root: RankHandle | None,
    traceback_of: Callable[[int], str],
    grace: float = GRACE_SECONDS,
    root_note: str = "",
) -> list[RankFailure]:
    """End every rank still running (SIGTERM, then SIGKILL after ``grace``); return each rank's
    fate, the root cause first."""
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
    ordered = sorted(handles, key=lambda h: (h is not root, h.rank))
    for h in ordered:
        code = h.poll()
        assert code is not None
        note = ""
        if h.rank in killed:
            note = f"did not stop within {grace:g} s of SIGTERM; killed by ddpkit (SIGKILL)"
        elif h.rank in ended_by_us:
            note = "ended by ddpkit (SIGTERM) after the root cause failed"
        elif h is root and root_note:
            note = root_note
        elif code == 0:
            note = "had already finished (exit code 0)"
        failures.append(
            RankFailure(
                rank=h.rank,
                pid=h.pid,
                exitcode=code,
                traceback=traceback_of(h.rank) if h is root else "",
                note=note,
            )
        )
    return failures
