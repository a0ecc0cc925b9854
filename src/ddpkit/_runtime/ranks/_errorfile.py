"""A failing rank's report to its launcher: one JSON file, written atomically, read by the
supervisor.

The file is named by ``DDPKIT_ERROR_FILE`` and lives in the launcher's private 0700 directory. A
rank that raised leaves its traceback; a rank the stall alarm ended leaves its stack and a note
(see :mod:`ddpkit._runtime.ranks._stall`). The supervisor reads it to choose the root cause and to
show the traceback, even before the rank's interpreter has finished exiting.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from ddpkit._runtime.ranks._clean_exit import end_after_exit_handlers
from ddpkit._runtime.ranks._scratch import write_private
from ddpkit._tracebacks import fold

#: "exception" (the rank raised), "peer_loss" (it raised because another rank went away) or
#: "stall" (the stall alarm ended it; the traceback is its stack)
ErrorKind = Literal["exception", "peer_loss", "stall"]
_KINDS: tuple[ErrorKind, ...] = ("exception", "peer_loss", "stall")


@dataclasses.dataclass(frozen=True)
class ErrorRecord:
    """What a failing rank left in its error file."""

    pid: int
    traceback: str
    kind: ErrorKind = "exception"
    note: str = ""
    never_arrived: bool = False
    #: "RuntimeError: boom": the exception's type and the first line of its message
    summary: str = ""
    #: the traceback with ddpkit's, torch's and Python's frames folded ('' when none were)
    folded: str = ""
    #: the innermost frame of the user's code: "/path/x.py:16, in f: raise ValueError(...)"
    where: str = ""

    def shown_traceback(self, verbose: bool) -> str:
        """The traceback a report shows: folded, unless ``verbose`` asks for every frame."""
        return self.traceback if verbose or not self.folded else self.folded


#: the fields an error file may leave out, each read as its default's type
_OPTIONAL: dict[str, Callable[[Any], Any]] = {
    f.name: type(f.default) for f in dataclasses.fields(ErrorRecord)[2:]
}


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
    folded: str = "",
    where: str = "",
) -> None:
    """Called in a failing rank: leave its report for the supervisor (0600, atomic rename)."""
    record = ErrorRecord(
        os.getpid(), traceback_text, kind, note, never_arrived, summary, folded, where
    )
    write_private(path, json.dumps(dataclasses.asdict(record)).encode())


def report_rank_failure(path: str | None, exc: BaseException) -> bool:
    """In a rank whose stage raised ``exc``: leave its traceback in its error file (when the
    launcher gave one), marked as a lost peer when another rank's end caused it. True when the
    report is in: the launcher shows it, and this rank's own copy of the traceback, printed
    when ``exc`` reaches the top of the script, is left out (:func:`quiet_when_uncaught`). A
    directory that is already gone means the launcher has ended: there is no one left to tell."""
    if not path:
        return False
    kind: ErrorKind = "peer_loss" if is_peer_loss(exc) else "exception"
    lines = str(exc).strip().splitlines()
    summary = f"{type(exc).__name__}: {lines[0][:300]}" if lines else type(exc).__name__
    shown = fold(exc, keep_all=False)
    try:
        write_error_file(
            path,
            "".join(traceback.format_exception(exc)),
            kind=kind,
            summary=summary,
            folded=shown.text if shown.folded else "",
            where=shown.where,
        )
    except OSError:
        return False
    return True


ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], object]


class _QuietFor:
    """``sys.excepthook`` that prints nothing for the exceptions a launcher already reports."""

    def __init__(self, previous: ExceptHook) -> None:
        self.previous = previous
        self.reported: list[BaseException] = []

    def __call__(
        self, kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        if any(value is r or value.__context__ is r for r in self.reported):
            # Uncaught, so the script ends (status 1): without the interpreter's teardown,
            # which gloo's threads may abort after the report is in.
            end_after_exit_handlers()
            return
        self.previous(kind, value, tb)


def quiet_when_uncaught(exc: BaseException) -> None:
    """When ``exc`` (reported to the launcher) ends this rank's script uncaught, print nothing:
    the launcher shows it once, in its report, and a second copy from every rank is what made a
    one-line error a page. Any other uncaught exception prints as before."""
    hook = sys.excepthook
    if not isinstance(hook, _QuietFor):
        hook = _QuietFor(hook)
        sys.excepthook = hook
    hook.reported.append(exc)


def read_error_file(path: str | os.PathLike[str]) -> ErrorRecord | None:
    """The record a rank left at ``path``; None when there is none (yet) or it is unreadable."""
    try:
        data = json.loads(Path(path).read_text())
        record = ErrorRecord(
            int(data["pid"]),
            str(data["traceback"]),
            **{name: read(data[name]) for name, read in _OPTIONAL.items() if name in data},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return record if record.kind in _KINDS else dataclasses.replace(record, kind="exception")


def raised(record: ErrorRecord) -> str:
    """'raised RuntimeError: boom': the summary the rank left, else the traceback's last line."""
    if record.summary:
        return f"raised {record.summary}"
    lines = [line for line in record.traceback.strip().splitlines() if line.strip()]
    return f"raised {lines[-1].strip()[:300]}" if lines else "raised an exception"
