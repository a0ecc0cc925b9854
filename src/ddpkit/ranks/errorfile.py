"""A failing rank's report to its launcher: one JSON file, written atomically, read by the
supervisor.

The file is named by ``DDPKIT_ERROR_FILE`` and lives in the launcher's private 0700 directory. A
rank that raised leaves its traceback; a rank the stall alarm ended leaves its stack and a note
(see :mod:`ddpkit.ranks.stall`). The supervisor reads it to choose the root cause and to show the
traceback, even before the rank's interpreter has finished exiting.
"""

from __future__ import annotations

import contextlib
import json
import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ddpkit.ranks.scratch import write_private

__all__ = [
    "ErrorKind",
    "ErrorRecord",
    "is_peer_loss",
    "raised",
    "read_error_file",
    "report_rank_failure",
    "write_error_file",
]

#: "exception" (the rank raised), "peer_loss" (it raised because another rank went away) or
#: "stall" (the stall alarm ended it; the traceback is its stack)
ErrorKind = Literal["exception", "peer_loss", "stall"]
_KINDS: tuple[ErrorKind, ...] = ("exception", "peer_loss", "stall")


@dataclass(frozen=True)
class ErrorRecord:
    """What a failing rank left in its error file."""

    pid: int
    traceback: str
    kind: ErrorKind = "exception"
    note: str = ""
    never_arrived: bool = False
    #: "RuntimeError: boom": the exception's type and the first line of its message
    summary: str = ""


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


def write_error_file(
    path: str | os.PathLike[str],
    traceback_text: str,
    *,
    kind: ErrorKind = "exception",
    note: str = "",
    never_arrived: bool = False,
    summary: str = "",
) -> None:
    """Called in a failing rank: leave its report for the supervisor (0600, atomic rename)."""
    record = {
        "pid": os.getpid(),
        "traceback": traceback_text,
        "kind": kind,
        "note": note,
        "never_arrived": never_arrived,
        "summary": summary,
    }
    write_private(path, json.dumps(record).encode())


def report_rank_failure(path: str | None, exc: BaseException) -> None:
    """In a rank whose stage raised ``exc``: leave its traceback in its error file (when the
    launcher gave one), marked as a lost peer when another rank's end caused it. A directory
    that is already gone means the launcher has ended: there is no one left to tell."""
    if not path:
        return
    kind: ErrorKind = "peer_loss" if is_peer_loss(exc) else "exception"
    lines = str(exc).strip().splitlines()
    summary = f"{type(exc).__name__}: {lines[0][:300]}" if lines else type(exc).__name__
    with contextlib.suppress(OSError):
        write_error_file(path, "".join(traceback.format_exception(exc)), kind=kind, summary=summary)


def read_error_file(path: str | os.PathLike[str]) -> ErrorRecord | None:
    """The record a rank left at ``path``; None when there is none (yet) or it is unreadable."""
    try:
        data = json.loads(Path(path).read_text())
        kind = str(data.get("kind", "exception"))
        return ErrorRecord(
            pid=int(data["pid"]),
            traceback=str(data["traceback"]),
            kind=kind if kind in _KINDS else "exception",
            note=str(data.get("note", "")),
            never_arrived=bool(data.get("never_arrived", False)),
            summary=str(data.get("summary", "")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def raised(record: ErrorRecord) -> str:
    """'raised RuntimeError: boom': the summary the rank left, else the traceback's last line."""
    if record.summary:
        return f"raised {record.summary}"
    lines = [line for line in record.traceback.strip().splitlines() if line.strip()]
    return f"raised {lines[-1].strip()[:300]}" if lines else "raised an exception"
