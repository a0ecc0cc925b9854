"""Each rank's fate in a distributed test, and which one is the root cause.

A rank that waits inside a collective (``barrier``, ``all_reduce``, ``init_process_group``...)
when the test times out is waiting *for* someone: the root cause is a rank that is not inside one
(its stacks, dumped before ddpkit ended it, show where it was), or one that never reached the
process group at all. A rank whose collective failed because a peer went away ("Connection closed
by peer") failed *because of* another: it is a consequence, shown with a short traceback (its own
test's frames and the error's first line), and the rank that failed on its own comes first.

The order of blame is the launchers' (:class:`~ddpkit._runtime.process.ending.Blame`): never
arrived; failed on its own or crashed (the earliest first); still running outside any collective at
the timeout; still running, stacks unknown; inside a collective or lost its peer; ended by ddpkit
after the root cause; finished. Each rank's section starts with the line a launcher prints for a
rank (:meth:`~ddpkit.errors.RankFailure.line`): ``rank 1 (pid 4242): exit code 1``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from ddpkit._runtime.process.ending import Blame
from ddpkit.testing._supervise import ProcessEnd

#: Lines of output a report shows per process: after a crash the cause is often further up
#: (a traceback, the launcher's report); at a timeout the stacks follow.
CRASH_LINES = 60
TIMEOUT_LINES = 20

_FRAME = re.compile(r'\s*File "(?P<path>.+)", line (?P<line>\d+) in (?P<func>\S+)')
# The Python side of every torch.distributed collective and of the rendezvous.
_COLLECTIVE_FILES = ("torch/distributed/distributed_c10d.py", "torch/distributed/rendezvous.py")
# Collectives that run below Python: DDP's gradient all-reduce runs inside backward (its hooks
# are C++), so a rank that waits for a peer's gradients shows only autograd's entry point.
_HIDDEN_COLLECTIVES = {("torch/autograd/graph.py", "_engine_run_backward"): "backward"}
# What a collective raises when a peer went away (gloo, the store, torch's DistError family).
_PEER_LOSS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "gloo",
    "distbackenderror",
    "distnetworkerror",
)


def finished(reports: Sequence[pytest.TestReport]) -> bool:
    return any(r.when == "teardown" for r in reports)


def first_failure(reports: Sequence[pytest.TestReport]) -> pytest.TestReport | None:
    return next((r for r in reports if r.failed), None)


def indent(text: str) -> str:
    return textwrap.indent(text.rstrip("\n"), "    ") if text.strip() else "    (no output)"


def output_block(end: ProcessEnd, lines: int = TIMEOUT_LINES) -> str:
    output = "\n".join(end.output.splitlines()[-lines:])
    block = f"last lines of output:\n{indent(output)}"
    if end.stacks:
        block += (
            f"\nPython stacks when ddpkit ended it (innermost call first):\n{indent(end.stacks)}"
        )
    return block


def heading(end: ProcessEnd, note: str | None = None, *, root: bool = False) -> str:
    """'--- rank 1 (pid 4242): exit code 1 ---': the line a launcher prints for a rank, as the
    head of its section; ``note`` says how it ended in place of its own fate."""
    fate = end.fate if note is None else dataclasses.replace(end.fate, note=note)
    return f"--- {fate.line()}{' (root cause)' if root else ''} ---"


def collective_of(stacks: str) -> str | None:
    """The torch.distributed call a rank's stack dump shows it inside (the innermost), or None
    when no thread is inside one."""
    for line in stacks.splitlines():
        if (m := _FRAME.match(line)) is None:
            continue
        if m["path"].endswith(_COLLECTIVE_FILES):
            return m["func"]
        for (path, func), name in _HIDDEN_COLLECTIVES.items():
            if m["path"].endswith(path) and m["func"] == func:
                return name
    return None


def _where(stacks: str) -> str:
    """The innermost frame of the thread that took the dump: ``file:line in function``."""
    for line in stacks.splitlines():
        m = _FRAME.match(line)
        if m:
            return f"{m['path'].rsplit('/', 1)[-1]}:{m['line']} in {m['func']}"
    return "an unknown place"


def _crash_line(report: pytest.TestReport) -> str:
    crash: Any = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) or report.longreprtext.strip()
    lines = message.strip().splitlines()
    return lines[0][:300] if lines else "(no message)"


def is_peer_loss(report: pytest.TestReport) -> bool:
    """A failure whose error says a peer went away: a consequence of another rank's end."""
    return any(word in _crash_line(report).lower() for word in _PEER_LOSS)


def _is_library(path: str) -> bool:
    return "/site-packages/" in path or "/dist-packages/" in path or "/lib/python" in path


def short_traceback(report: pytest.TestReport) -> str:
    """The failure's frames in the test's own code (``path:line: source``) and the first line
    of its error: what a consequence needs, instead of pages of torch's source."""
    longrepr: Any = report.longrepr
    chain = getattr(longrepr, "chain", None)
    tb = chain[-1][0] if chain else getattr(longrepr, "reprtraceback", None)
    lines = []
    for entry in getattr(tb, "reprentries", []):
        loc = getattr(entry, "reprfileloc", None)
        if loc is None or _is_library(str(loc.path)):
            continue
        source = next((s for s in getattr(entry, "lines", []) if s.startswith(">")), ">")
        lines.append(f"{loc.path}:{loc.lineno}: {source[1:].strip()}")
    return "\n".join([*lines, _crash_line(report)])


@dataclass(frozen=True)
class RankVerdict:
    """One rank's fate, and where it stands in the order of blame (lowest first)."""

    end: ProcessEnd
    reports: tuple[pytest.TestReport, ...]
    status: str
    """passed, skipped, xfailed, failed, lost peer, crashed, never arrived, outside,
    waiting, timed out, ended"""
    order: tuple[Blame, float, int]

    @property
    def bad(self) -> bool:
        return self.status not in ("passed", "skipped", "xfailed", "ended")


def at_timeout(
    end: ProcessEnd, reports: Sequence[pytest.TestReport], *, distributed: bool = False
) -> RankVerdict:
    """A process at its test's timeout: outside every collective (a cause), inside one (waiting
    for a cause), or unknown (no stacks); a distributed rank that never reached the plugin's
    process group first of all (a standalone test's process has none to arrive at)."""
    reps = tuple(reports)
    if distributed and not end.arrived:
        return RankVerdict(end, reps, "never arrived", (Blame.NEVER_ARRIVED, 0, end.rank))
    if not end.stacks:
        return RankVerdict(end, reps, "timed out", (Blame.UNKNOWN, 0, end.rank))
    if collective_of(end.stacks) is None:
        return RankVerdict(end, reps, "outside", (Blame.OUTSIDE, 0, end.rank))
    return RankVerdict(end, reps, "waiting", (Blame.CONSEQUENCE, 0, end.rank))


def judge(end: ProcessEnd, reports: Sequence[pytest.TestReport], timed_out: bool) -> RankVerdict:
    """One rank's status. A rank ended by ddpkit is a cause only on a timeout (and then only
    outside a collective); after another rank's failure it is a consequence."""
    reps = tuple(reports)
    failure = first_failure(reps)
    rank = end.rank
    if failure is not None:
        when = failure.stop or end.ended_at
        if is_peer_loss(failure):
            return RankVerdict(end, reps, "lost peer", (Blame.CONSEQUENCE, when, rank))
        return RankVerdict(end, reps, "failed", (Blame.FAILED, when, rank))
    if finished(reps) and end.exitcode in (0, None):
        skipped = next((r for r in reps if r.skipped), None)
        if skipped is None:
            status = "passed"
        else:
            status = "xfailed" if hasattr(skipped, "wasxfail") else "skipped"
        return RankVerdict(end, reps, status, (Blame.FINISHED, 0, rank))
    if end.ended_by_ddpkit:
        if timed_out:
            return at_timeout(end, reps, distributed=True)
        return RankVerdict(end, reps, "ended", (Blame.ENDED, math.inf, rank))
    return RankVerdict(end, reps, "crashed", (Blame.FAILED, end.ended_at, rank))


def root_note(verdicts: Sequence[RankVerdict]) -> str:
    """Why the first verdict is the root cause, when it takes the stacks to tell."""
    root = verdicts[0]
    waiting = [v for v in verdicts if v.status == "waiting"]
    where = ", ".join(f"rank {v.end.rank} in {collective_of(v.end.stacks)}" for v in waiting)
    if root.status == "outside" and waiting:
        return (
            f"\nRank {root.end.rank} was not inside a collective ({_where(root.end.stacks)}) "
            f"while the others waited in one for it ({where})."
        )
    if root.status == "waiting":
        return (
            f"\nEvery rank was inside a collective ({where}): they do not call the same "
            f"collectives in the same order."
        )
    return ""


def _note(v: RankVerdict) -> str:
    """How one rank ended, for the head of its section."""
    end = v.end
    ended = end.ended_how or "ended by ddpkit"
    failure = first_failure(v.reports)
    if v.status in ("failed", "lost peer") and failure is not None:
        lost = ", a consequence: its collective lost a peer" if v.status == "lost peer" else ""
        return f"failed in {failure.when}{lost}"
    if v.status == "crashed":
        never = "" if end.arrived else " (it never reached init_process_group)"
        return f"{end.fate.exit_status} before it finished the test{never}"
    notes = {
        "never arrived": f"never arrived: it did not reach init_process_group; {ended}",
        "outside": f"still running, outside any collective ({_where(end.stacks)}); {ended}",
        "waiting": f"waiting in {collective_of(end.stacks)}; {ended}",
        "timed out": f"still running; {ended}",
        "ended": ended + ("" if end.arrived else " (it had not reached init_process_group)"),
    }
    return notes.get(v.status, v.status)


def describe(v: RankVerdict, root: bool) -> str:
    """The section of the report about one rank."""
    head = heading(v.end, _note(v), root=root)
    failure = first_failure(v.reports)
    if v.status == "lost peer" and failure is not None and not root:
        return f"{head}\n{indent(short_traceback(failure))}"
    if v.status in ("failed", "lost peer") and failure is not None:
        return f"{head}\n{failure.longreprtext}"
    if v.status in ("passed", "skipped", "xfailed"):
        return head
    lines = CRASH_LINES if v.status == "crashed" else TIMEOUT_LINES
    return f"{head}\n{output_block(v.end, lines)}"
