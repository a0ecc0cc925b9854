"""The parent's verdict from what each process left: relayed reports, or one failure that names
every rank's fate, root cause first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ddpkit._runtime.process.ending import Ending
from ddpkit.testing._markers import DistributedSpec
from ddpkit.testing._report import distributed_reports, standalone_reports
from ddpkit.testing._rootcause import judge
from ddpkit.testing._supervise import JobEnd, ProcessEnd
from ddpkit.testing._worker import ProcessRecord

SPEC = DistributedSpec(world_size=2, backend="gloo", timeout=None)
#: What the parent's Job says of a process it ended, in the launchers' words (_runtime.process.ending).
AT_TIMEOUT = Ending("at the test's timeout (7 s)", 0.0, frozenset({1}), frozenset({1})).note(1)
AFTER_FAILURE = Ending("after rank 1 failed", 2.0, frozenset({1})).note(1)


def rep(when: str, outcome: str, longrepr: Any = None, stop: float = 0.0, **extra: Any) -> Any:
    return pytest.TestReport(
        "t.py::test_a", ("t.py", 0, "test_a"), {}, outcome, longrepr, when, stop=stop, **extra
    )  # type: ignore[arg-type]


def passed() -> list[Any]:
    return [rep("setup", "passed"), rep("call", "passed"), rep("teardown", "passed")]


def failed(text: str, stop: float) -> list[Any]:
    return [rep("setup", "passed"), rep("call", "failed", text, stop), rep("teardown", "passed")]


def proc(
    rank: int,
    reports: list[Any] | None,
    *,
    exitcode: int | None = 0,
    direct: bool = True,
    ended: str = "",
    arrived: bool = True,
    ended_at: float = 100.0,
    output: str = "",
    stacks: str = "",
) -> ProcessEnd:
    record = None
    if reports is not None:
        record = ProcessRecord(
            pid=1000 + rank, rank=rank, direct=direct, log=Path("l"),
            reports=tuple({"obj": r} for r in reports), arrived=arrived,
        )  # fmt: skip
    return ProcessEnd(
        rank=rank, pid=1000 + rank, direct=direct, exitcode=exitcode, record=record,
        ended_by_ddpkit=bool(ended), ended_at=ended_at, log=Path("l"), output=output,
        stacks=stacks, ended_how=ended,
    )  # fmt: skip


def deserialize(data: Any) -> Any:
    return data["obj"]


def job(*processes: ProcessEnd, timed_out: bool = False, leftover: tuple[str, ...] = ()) -> JobEnd:
    return JobEnd(
        processes=processes, timed_out=timed_out, timeout=7.0 if timed_out else None,
        leftover=leftover,
    )  # fmt: skip


@pytest.fixture
def item(request: pytest.FixtureRequest) -> pytest.Item:
    node = request.node
    assert isinstance(node, pytest.Item)
    return node


def text_of(reports: list[Any]) -> str:
    (failure,) = [r for r in reports if r.failed]
    return str(failure.longreprtext)


# -- distributed --------------------------------------------------------------------------------


def test_every_rank_passed_relays_rank_zeros_reports(item: pytest.Item) -> None:
    rank0 = passed()
    reports = distributed_reports(item, SPEC, job(proc(0, rank0), proc(1, passed())), deserialize)
    assert reports == rank0
    assert {r.nodeid for r in reports} == {item.nodeid}


def test_a_skip_is_relayed_with_its_reason(item: pytest.Item) -> None:
    skip = [rep("setup", "skipped", ("t.py", 3, "Skipped: no gloo")), rep("teardown", "passed")]
    reports = distributed_reports(item, SPEC, job(proc(0, skip), proc(1, skip)), deserialize)
    assert reports[0].skipped and reports[0].longrepr == ("t.py", 3, "Skipped: no gloo")


def test_the_rank_that_failed_first_is_the_root_cause(item: pytest.Item) -> None:
    end = job(
        proc(0, failed("E   AssertionError: rank zero is off", stop=20.0), exitcode=1),
        proc(1, failed("E   ValueError: rank one exploded", stop=10.0), exitcode=1),
    )
    text = text_of(distributed_reports(item, SPEC, end, deserialize))
    assert text.startswith(
        "distributed test failed on 2 of 2 ranks (world_size=2, backend=gloo); root cause: rank 1."
    )
    assert text.index("--- rank 1 (pid 1001): failed in call (root cause) ---") < text.index(
        "--- rank 0 (pid 1000): failed in call ---"
    )
    assert "rank one exploded" in text and "rank zero is off" in text


LOST = "E   RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer [::1]:5"


def test_a_rank_whose_collective_lost_its_peer_is_a_consequence_even_when_it_failed_first(
    item: pytest.Item,
) -> None:
    end = job(
        proc(0, failed(LOST + "\n" + "torch source\n" * 70, stop=5.0), exitcode=1),
        proc(1, failed("E   ValueError: rank one exploded", stop=10.0), exitcode=1),
    )
    text = text_of(distributed_reports(item, SPEC, end, deserialize))
    assert text.startswith(
        "distributed test failed on 1 of 2 ranks (and on 1 more as a consequence) (world_size=2, "
        "backend=gloo); root cause: rank 1."
    )
    assert "--- rank 1 (pid 1001): failed in call (root cause) ---\nE   ValueError" in text
    assert text.endswith(
        "--- rank 0 (pid 1000): failed in call, a consequence: its collective lost a peer ---\n"
        f"    {LOST}"
    )  # one line, not the 70 of torch's source


IN_BARRIER = """Current thread 0x1 (most recent call first):
  File "/venv/site-packages/torch/distributed/distributed_c10d.py", line 4900 in barrier
  File "/venv/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper
  File "/t/test_hang.py", line 9 in test_hang"""
SLEEPING = """Current thread 0x2 (most recent call first):
  File "/t/test_hang.py", line 7 in test_hang
  File "/venv/site-packages/_pytest/python.py", line 166 in pytest_pyfunc_call"""


@pytest.mark.parametrize("sleeper", [0, 1])
def test_on_a_timeout_the_rank_outside_every_collective_is_the_root_cause(
    item: pytest.Item, sleeper: int
) -> None:
    stacks = [IN_BARRIER, IN_BARRIER]
    stacks[sleeper] = SLEEPING
    end = job(
        *(proc(r, [rep("setup", "passed")], exitcode=-9, ended=AT_TIMEOUT, stacks=stacks[r])
          for r in (0, 1)),
        timed_out=True,
    )  # fmt: skip
    waiter = 1 - sleeper
    text = text_of(distributed_reports(item, SPEC, end, deserialize))
    assert text.startswith(
        "distributed test timed out after 7 s (world_size=2, backend=gloo); ddpkit ended every "
        f"rank. Root cause: rank {sleeper}.\nRank {sleeper} was not inside a collective "
        f"(test_hang.py:7 in test_hang) while the others waited in one for it (rank {waiter} in "
        "barrier)."
    )
    assert (
        f"--- rank {sleeper} (pid {1000 + sleeper}): still running, outside any collective "
        "(test_hang.py:7 in test_hang); killed by ddpkit (SIGKILL) at the test's timeout (7 s) "
        "(root cause) ---"
    ) in text
    assert (
        f"--- rank {waiter} (pid {1000 + waiter}): waiting in barrier; killed by ddpkit (SIGKILL) "
        "at the test's timeout (7 s) ---"
    ) in text


def test_on_a_timeout_with_every_rank_in_a_collective_the_mismatch_is_named(
    item: pytest.Item,
) -> None:
    all_reduce = IN_BARRIER.replace("in barrier", "in all_reduce")
    end = job(
        proc(0, [rep("setup", "passed")], exitcode=-9, ended=AT_TIMEOUT, stacks=all_reduce),
        proc(1, [rep("setup", "passed")], exitcode=-9, ended=AT_TIMEOUT, stacks=IN_BARRIER),
        timed_out=True,
    )
    text = text_of(distributed_reports(item, SPEC, end, deserialize))
    assert (
        "Root cause: rank 0.\nEvery rank was inside a collective (rank 0 in all_reduce, rank 1 in "
        "barrier): they do not call the same collectives in the same order."
    ) in text


def test_a_rank_that_never_arrived_is_named_first_on_a_timeout(item: pytest.Item) -> None:
    end = job(
        proc(0, [rep("setup", "passed")], exitcode=-9, ended=AT_TIMEOUT, output="waiting"),
        proc(1, [], exitcode=-9, ended=AT_TIMEOUT, arrived=False, output="importing...",
             stacks='Current thread 0x1 (most recent call first):\n  File "t.py", line 3 in <module>'),
        timed_out=True,
    )  # fmt: skip
    text = text_of(distributed_reports(item, SPEC, end, deserialize))
    assert text.startswith(
        "distributed test timed out after 7 s (world_size=2, backend=gloo); ddpkit ended every "
        "rank. Root cause: rank 1.\nRank 1 never arrived: it did not reach init_process_group"
    )
    assert (
        "--- rank 1 (pid 1001): never arrived: it did not reach init_process_group; killed by "
        "ddpkit (SIGKILL) at the test's timeout (7 s) (root cause) ---\nlast lines of output:\n"
        "    importing...\nPython stacks" in text
    )
    assert (
        "--- rank 0 (pid 1000): still running; killed by ddpkit (SIGKILL) at the test's timeout "
        "(7 s) ---"
    ) in text


def test_a_rank_ended_after_the_root_cause_is_a_consequence(item: pytest.Item) -> None:
    end = job(
        proc(0, [rep("setup", "passed")], exitcode=-15, ended=AFTER_FAILURE),
        proc(1, failed("E   boom", stop=1.0), exitcode=1),
    )
    verdicts = [judge(p, deserialize_all(p), timed_out=False) for p in end.processes]
    assert [v.status for v in verdicts] == ["ended", "failed"]
    text = text_of(distributed_reports(item, SPEC, end, deserialize))
    assert "failed on 1 of 2 ranks" in text
    assert "--- rank 0 (pid 1000): ended by ddpkit (SIGTERM) after rank 1 failed ---" in text


def test_a_rank_that_crashed_without_a_report(item: pytest.Item) -> None:
    end = job(proc(0, passed()), proc(1, None, exitcode=-11, output="Segmentation fault"))
    text = text_of(distributed_reports(item, SPEC, end, deserialize))
    assert (
        "--- rank 1 (pid 1001): killed by signal SIGSEGV before it finished the test (it never "
        "reached init_process_group) (root cause) ---\nlast lines of output:\n    "
        "Segmentation fault" in text
    )


def test_a_setup_failure_stays_a_setup_error(item: pytest.Item) -> None:
    broken = [rep("setup", "failed", "E   init failed", 1.0), rep("teardown", "passed")]
    reports = distributed_reports(item, SPEC, job(proc(0, broken, exitcode=1), proc(1, passed())),
                                  deserialize)  # fmt: skip
    assert [(r.when, r.outcome) for r in reports] == [("setup", "failed"), ("teardown", "passed")]


def deserialize_all(p: ProcessEnd) -> list[Any]:
    assert p.record is not None
    return [deserialize(d) for d in p.record.reports]


# -- standalone ---------------------------------------------------------------------------------


def test_standalone_relays_the_interpreters_reports(item: pytest.Item) -> None:
    own = failed("E   AssertionError: math broke", stop=1.0)
    assert standalone_reports(item, job(proc(0, own, exitcode=1)), deserialize) == own


def test_standalone_timeout_shows_every_rank(item: pytest.Item) -> None:
    end = job(
        proc(0, [rep("setup", "passed")], exitcode=-9, ended=AT_TIMEOUT, output="r0 waits"),
        proc(1, [rep("setup", "passed")], direct=False, exitcode=None, ended=AT_TIMEOUT,
             output="r1 waits", stacks="Current thread 0x2 (most recent call first):"),
        timed_out=True,
    )  # fmt: skip
    reports = standalone_reports(item, end, deserialize)
    assert [(r.when, r.outcome) for r in reports] == [
        ("setup", "passed"), ("call", "failed"), ("teardown", "passed")
    ]  # fmt: skip
    text = text_of(reports)
    assert text.startswith("standalone test timed out after 7 s; ddpkit ended its process tree "
                           "(pids 1000, 1001).")  # fmt: skip
    assert (
        "--- rank 0 (pid 1000): killed by ddpkit (SIGKILL) at the test's timeout (7 s) ---\n"
        "last lines of output:\n    r0 waits"
    ) in text
    assert (
        "--- rank 1 (pid 1001): killed by ddpkit (SIGKILL) at the test's timeout (7 s) "
        "(root cause) ---\nlast lines of output:\n    r1 waits\nPython stacks"
    ) in text


STUCK_IN_STEP = """Current thread 0x1 (most recent call first):
  File "/repo/test_fit.py", line 17 in training_step
  File "/repo/src/ddpkit/trainer/_optimization.py", line 38 in forward"""
WAITS_IN_BACKWARD = """Current thread 0x2 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 979 in _engine_run_backward
  File "/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 395 in backward"""


def test_standalone_timeout_names_the_rank_outside_every_collective(item: pytest.Item) -> None:
    """As for a distributed test: the rank that waits in DDP's gradient all-reduce (backward)
    waits for the one that is still in its training_step."""
    end = job(
        proc(0, [rep("setup", "passed")], exitcode=-9, ended=AT_TIMEOUT, stacks=WAITS_IN_BACKWARD),
        proc(1, [rep("setup", "passed")], direct=False, exitcode=None, ended=AT_TIMEOUT,
             stacks=STUCK_IN_STEP),
        timed_out=True,
    )  # fmt: skip
    text = text_of(standalone_reports(item, end, deserialize))
    assert text.startswith(
        "standalone test timed out after 7 s; ddpkit ended its process tree (pids 1000, 1001). "
        "Root cause: rank 1.\nRank 1 was not inside a collective (test_fit.py:17 in "
        "training_step) while the others waited in one for it (rank 0 in backward).\nFix: "
    ), text
    assert text.index("--- rank 1 (pid 1001): killed by ddpkit (SIGKILL) at the test's timeout "
                      "(7 s) (root cause) ---") < text.index("--- rank 0 (pid 1000)")  # fmt: skip


def test_standalone_interpreter_that_died_before_reporting(item: pytest.Item) -> None:
    output = "\n".join(f"line {i}" for i in range(100))
    end = job(
        proc(0, None, exitcode=4, output=output + "\nERROR: not found: t.py::test_a"),
        proc(1, [rep("setup", "passed")], direct=False, exitcode=None, output="rank 1 said"),
    )
    text = text_of(standalone_reports(item, end, deserialize))
    assert text.startswith(
        "the standalone test's interpreter (pid 1000) ended before it finished the test (exit "
        "code 4).\n\n--- rank 0 (pid 1000): exit code 4 ---\nlast lines of output:\n    line 41\n"
    )  # the last 60 lines
    assert "    ERROR: not found: t.py::test_a\n\n--- rank 1 (pid 1001): ended ---\n" in text
    assert text.endswith("last lines of output:\n    rank 1 said")


def test_standalone_a_rank_that_failed_fails_a_test_rank_zero_passed(item: pytest.Item) -> None:
    end = job(proc(0, passed()), proc(1, failed("E   rank 1 saw NaN", 1.0), direct=False))
    reports = standalone_reports(item, end, deserialize)
    call = next(r for r in reports if r.when == "call")
    assert call.failed
    assert call.longreprtext.startswith("--- rank 1 (pid 1001): failed in call ---\nE   rank 1 saw")


def test_standalone_a_rank_that_ran_other_tests(item: pytest.Item) -> None:
    other = passed()
    for r in other:
        r.nodeid = item.nodeid
    other[1].nodeid = "t.py::test_b"
    end = job(proc(0, passed()), proc(1, other, direct=False))
    text = text_of(standalone_reports(item, end, deserialize))
    assert "--- rank 1 (pid 1001): ran other tests too: t.py::test_b ---" in text


def test_standalone_leftover_processes_fail_an_xfail_too(item: pytest.Item) -> None:
    xfailed = [rep("setup", "passed"), rep("call", "skipped", ("t.py", 1, "x"), wasxfail="bug"),
               rep("teardown", "passed")]  # fmt: skip
    reports = standalone_reports(
        item, job(proc(0, xfailed), leftover=("77: sleep 60",)), deserialize
    )
    call = reports[1]
    assert call.failed and not hasattr(call, "wasxfail")
    assert "    pid 77: sleep 60" in call.longreprtext


def test_standalone_failure_gets_the_other_ranks_as_a_section(item: pytest.Item) -> None:
    own = failed("E   ChildFailedError", stop=1.0)
    end = job(proc(0, own, exitcode=1), proc(1, failed("E   rank 1 boom", 0.5), direct=False))
    reports = standalone_reports(item, end, deserialize)
    call = reports[1]
    assert call.longreprtext == "E   ChildFailedError"
    assert call.sections[-1][0] == "ddpkit: the other processes of this test"
    assert "E   rank 1 boom" in call.sections[-1][1]
