"""The parent's verdict on an isolated test: the reports pytest logs for it.

The processes' own reports are relayed as they are whenever they tell the whole story (a pass, a
failure with its traceback, a skip with its reason, an xfail), so the parent shows exactly what
a run of the test in the fresh interpreter would. When they do not (a timeout, a crash, a rank
that failed, never arrived or left processes behind), the parent writes one failure that names
every rank's fate, the root cause first (:mod:`ddpkit.testing._rootcause`), with its traceback or
its last lines of output.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import pytest

from ddpkit.testing._markers import DistributedSpec
from ddpkit.testing._rootcause import (
    CRASH_LINES,
    RankVerdict,
    at_timeout,
    describe,
    finished,
    first_failure,
    heading,
    judge,
    output_block,
    root_note,
)
from ddpkit.testing._supervise import JobEnd, ProcessEnd

Deserialize = Callable[[Mapping[str, Any]], Any]
When = Literal["setup", "call", "teardown"]


def _reports(end: ProcessEnd, deserialize: Deserialize) -> list[pytest.TestReport]:
    reports = [] if end.record is None else map(deserialize, end.record.reports)
    return [rep for rep in reports if isinstance(rep, pytest.TestReport)]


def failed_reports(
    item: pytest.Item, when: When, text: str, sections: Sequence[tuple[str, str]] = ()
) -> list[pytest.TestReport]:
    """The reports of a test that failed in phase ``when`` with ``text`` as its failure (and
    ``sections``, e.g. captured output, shown under it): setup and teardown passed around it."""
    phases: tuple[When, ...] = ("setup", when, "teardown")
    return [
        pytest.TestReport(
            nodeid=item.nodeid,
            location=item.location,
            keywords={name: 1 for name in item.keywords},
            outcome="failed" if phase == when else "passed",
            longrepr=text if phase == when else None,
            when=phase,
            sections=sections if phase == when else (),
        )
        for phase in dict.fromkeys(phases)  # a failed setup or teardown is there once
    ]


# -- standalone -------------------------------------------------------------------------------


def _timeout_text(kind: str, end: JobEnd, deserialize: Deserialize) -> str:
    """A timed-out standalone test: the root cause first (the rank outside every collective
    while the others wait in one), then each process's last output and stacks."""
    pids = ", ".join(str(p.pid) for p in end.processes)
    assert end.timeout is not None
    verdicts = sorted((at_timeout(p, _reports(p, deserialize)) for p in end.processes),
                      key=lambda v: v.order)  # fmt: skip
    head = (
        f"{kind} test timed out after {end.timeout:g} s; ddpkit ended its process tree "
        f"(pids {pids})."
    )
    several = len(verdicts) > 1 and verdicts[0].status != "timed out"
    if several:
        head += f" Root cause: rank {verdicts[0].end.rank}.{root_note(verdicts)}"
    lines = [
        head,
        f"Fix: find where it hangs in the stacks below, or give it more time with "
        f"@pytest.mark.{kind}(timeout=...).",
    ]
    for i, v in enumerate(verdicts if several else [at_timeout(p, ()) for p in end.processes]):
        lines.append(f"\n{heading(v.end, root=several and i == 0)}\n{output_block(v.end)}")
    return "\n".join(lines)


def _named_pids(reports: Sequence[pytest.TestReport]) -> set[int]:
    """The pids a failure's report already speaks for: a ``ChildFailedError`` (or rank 0's own
    error, with a note per rank) names each rank's fate, the root cause's traceback included."""
    failure = first_failure(reports)
    if failure is None:
        return set()
    return {int(pid) for pid in re.findall(r"\brank \d+ \(pid (\d+)\)", failure.longreprtext)}


def _rank_problem(
    item: pytest.Item, p: ProcessEnd, reports: list[pytest.TestReport], named: set[int]
) -> str:
    """Why a rank the test started makes the test fail ('' when it does not, or when the
    test's own failure already tells how it ended: ``named``)."""
    others = sorted({r.nodeid for r in reports} - {item.nodeid})
    if p.pid in named and not others:
        return ""
    failure = first_failure(reports)
    if failure is not None:
        return f"{heading(p, f'failed in {failure.when}')}\n{failure.longreprtext}"
    if others:
        ran = f"ran other tests too: {', '.join(others)}"
        return (
            f"{heading(p, ran)}\n"
            f"Fix: start ranks of this test with the test's own command line (DDPPlugin does)."
        )
    if not finished(reports):
        # ended by ddpkit: the launchers' words for it, then when
        fate = f"{p.ended_how}, before" if p.ended_how else "ended before"
        fate += " it finished the test"
        return f"{heading(p, fate)}\n{output_block(p, CRASH_LINES)}"
    return ""


def standalone_reports(
    item: pytest.Item, end: JobEnd, deserialize: Deserialize
) -> list[pytest.TestReport]:
    """The reports of a standalone test: its interpreter's own, when they tell the story."""
    direct = end.processes[0]
    if end.timed_out:
        return failed_reports(item, "call", _timeout_text("standalone", end, deserialize))
    reports = _reports(direct, deserialize)
    if not finished(reports):
        lines = [
            f"the standalone test's interpreter (pid {direct.pid}) ended before it finished "
            f"the test ({direct.fate.how})."
        ]
        for p in end.processes:
            lines.append(f"\n{heading(p)}\n{output_block(p, CRASH_LINES)}")
        return failed_reports(item, "call", "\n".join(lines))
    named = _named_pids(reports)
    problems = [
        problem
        for p in end.processes[1:]
        if (problem := _rank_problem(item, p, _reports(p, deserialize), named))
    ]
    if direct.exitcode not in (0, None) and first_failure(reports) is None:
        problems.append(
            f"the test finished, but its interpreter did not end well:\n{heading(direct)}\n"
            f"{output_block(direct, CRASH_LINES)}"
        )
    if end.leftover:
        problems.append(_leftover_text(end))
    for rep in reports:
        rep.nodeid = item.nodeid
    if problems:
        _fail_with(reports, "\n\n".join(problems))
    return reports


def _leftover_text(end: JobEnd) -> str:
    listed = "\n".join(f"    pid {line}" for line in end.leftover)
    return (
        f"--- processes still running after the test's interpreters ended (ddpkit ended "
        f"them) ---\n{listed}\nFix: wait for the processes the test starts before it returns."
    )


def _fail_with(reports: list[pytest.TestReport], text: str) -> None:
    """Make the test's reports fail with ``text``: appended to a failure as a section, or
    replacing the outcome of a test that passed or skipped."""
    failure = first_failure(reports)
    if failure is not None:
        failure.sections.append(("ddpkit: the other processes of this test", text))
        return
    target = next((r for r in reports if r.when == "call"), reports[0])
    target.outcome = "failed"
    target.longrepr = text
    if hasattr(target, "wasxfail"):
        del target.wasxfail


# -- distributed ------------------------------------------------------------------------------


def _headline(
    spec: DistributedSpec, end: JobEnd, verdicts: list[RankVerdict], bad: list[RankVerdict]
) -> str:
    """The first lines of a failed distributed test's report: what happened, the root cause."""
    shape = f"world_size={spec.world_size}, backend={spec.backend}"
    root = verdicts[0]
    if not bad:
        head = f"distributed test ({shape}): every rank finished, but:"
    elif end.timed_out:
        head = (
            f"distributed test timed out after {end.timeout or 0:g} s ({shape}); ddpkit ended "
            f"every rank. Root cause: rank {root.end.rank}.{root_note(verdicts)}"
        )
    else:
        lost = sum(v.status == "lost peer" for v in bad)
        also = f" (and on {lost} more as a consequence)" if lost and lost < len(bad) else ""
        head = (
            f"distributed test failed on {len(bad) - lost if also else len(bad)} of "
            f"{spec.world_size} ranks{also} ({shape}); root cause: rank {root.end.rank}."
        )
    missing = [v.end.rank for v in verdicts if v.status == "never arrived"]
    if missing:
        names = ", ".join(str(r) for r in missing)
        head += (
            f"\nRank{'s' if len(missing) > 1 else ''} {names} never arrived: "
            f"{'they' if len(missing) > 1 else 'it'} did not reach init_process_group "
            f"(stuck before the test: imports, collection or fixtures)."
        )
    return head


def _failed(
    item: pytest.Item,
    spec: DistributedSpec,
    end: JobEnd,
    verdicts: list[RankVerdict],
    extras: list[str],
) -> list[pytest.TestReport]:
    bad = [v for v in verdicts if v.bad]
    root = verdicts[0]
    described = [describe(v, i == 0 and v.bad) for i, v in enumerate(verdicts)]
    text = "\n\n".join([_headline(spec, end, verdicts, bad), *described, *extras])
    failure = first_failure(root.reports)
    when: When = "call"
    if failure is not None and failure.when in ("setup", "teardown"):
        when = failure.when
    # The captured output of each rank that failed on its own, as pytest shows a test's own
    # (a consequence's is torch's noise about the lost peer).
    sections = [
        (f"rank {v.end.rank}: {name}", content)
        for v in verdicts
        if v.status == "failed" and (rank_failure := first_failure(v.reports)) is not None
        for name, content in rank_failure.sections
    ]
    return failed_reports(item, when, text, sections)


def distributed_reports(
    item: pytest.Item, spec: DistributedSpec, end: JobEnd, deserialize: Deserialize
) -> list[pytest.TestReport]:
    """The reports of a distributed test: it passes when every rank passes."""
    ranks = [p for p in end.processes if p.direct]
    verdicts = sorted(
        (judge(p, _reports(p, deserialize), end.timed_out) for p in ranks),
        key=lambda v: v.order,
    )
    extras = [
        problem
        for p in end.processes
        if not p.direct and (problem := _rank_problem(item, p, _reports(p, deserialize), set()))
    ]
    if end.leftover:
        extras.append(_leftover_text(end))
    if extras or any(v.bad for v in verdicts):
        return _failed(item, spec, end, verdicts, extras)
    # Every rank finished cleanly: relay one rank's own reports (the first that skipped or
    # xfailed, else rank 0's), so that a skip keeps its reason and an xfail its mark.
    skipped = (v for v in verdicts if v.status in ("skipped", "xfailed"))
    chosen = next(skipped, None) or min(verdicts, key=lambda v: v.end.rank)
    reports = list(chosen.reports)
    for rep in reports:
        rep.nodeid = item.nodeid
    return reports
