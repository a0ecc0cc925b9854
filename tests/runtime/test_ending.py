"""All-or-nothing supervision on real processes (:mod:`ddpkit._runtime.process`, shared by the
launchers and the test parent): ending a rank ends its own children, even one that left its
group, a rank that ignores SIGTERM is killed, and the root cause is the rank that failed first on
its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ddpkit._runtime.process.context import ProcessContext
from ddpkit._runtime.process.ending import (
    GRACE_SECONDS,
    RecordOf,
    choose_root,
    end_job,
    first_failure,
)
from ddpkit._runtime.process.proc import Rank
from ddpkit._runtime.ranks._errorfile import ErrorRecord, raised, read_error_file, write_error_file
from ddpkit._runtime.ranks._lifeline import preexec_for_rank
from ddpkit.errors import RankFailure
from ddpkit.utilities._procs import is_running

pytestmark = pytest.mark.timeout(60)

SLEEPER = "import time\nwhile True: time.sleep(0.1)"
WITH_GRANDCHILD = (
    "import subprocess, sys, time\n"
    "g = subprocess.Popen([sys.executable, '-c', 'import time\\nwhile True: time.sleep(0.1)'])\n"
    "print(g.pid, flush=True)\n"
    "while True: time.sleep(0.1)"
)
# A grandchild that leaves the rank's group (its own session): only the tree finds it.
WITH_LOOSE_GRANDCHILD = WITH_GRANDCHILD.replace("'import time", "'import os, time\\nos.setsid()")
IGNORES_SIGTERM = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
    "while True: time.sleep(0.1)"
)


class Ranks:
    """Real rank-like processes, each leading its own process group as ddpkit starts them."""

    def __init__(self) -> None:
        self.handles: list[Rank] = []

    def start(self, code: str, rank: int) -> Rank:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            preexec_fn=preexec_for_rank(os.getpid()),
        )
        handle = Rank(rank=rank, proc=proc)
        self.handles.append(handle)
        return handle

    def close(self) -> None:
        for h in self.handles:
            if h.proc.poll() is None:
                h.proc.kill()
            h.proc.wait()
            if h.proc.stdout is not None:
                h.proc.stdout.close()


@pytest.fixture
def ranks() -> Iterator[Ranks]:
    r = Ranks()
    yield r
    r.close()


def until(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Whether ``condition`` holds within ``seconds`` (it is asked every 50 ms)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def no_record(rank: int) -> ErrorRecord | None:
    return None


def end_all(
    ranks: list[Rank],
    root: Rank | None,
    record_of: RecordOf,
    *,
    reason: str = "after the root cause failed",
    grace: float = GRACE_SECONDS,
) -> list[RankFailure]:
    """A job of ``ranks`` ended as a launcher ends it: each rank's fate, the root cause first."""
    context = ProcessContext("a job", record_of)
    context.ranks.extend(ranks)
    return context.close(reason, root, grace=grace)


def test_ending_a_rank_ends_its_own_children(ranks: Ranks) -> None:
    h = ranks.start(WITH_GRANDCHILD, rank=1)
    assert h.proc.stdout is not None
    grandchild = int(h.proc.stdout.readline())
    assert os.getpgid(h.pid) == h.pid  # it leads its own group
    fates = end_all([h], None, no_record, reason="after rank 0 failed")
    assert fates[0].exitcode == -signal.SIGTERM
    assert fates[0].note == "ended by ddpkit (SIGTERM) after rank 0 failed"
    assert until(lambda: not is_running(grandchild))


def test_ending_a_rank_ends_a_child_that_left_its_group(ranks: Ranks) -> None:
    h = ranks.start(WITH_LOOSE_GRANDCHILD, rank=1)
    assert h.proc.stdout is not None
    grandchild = int(h.proc.stdout.readline())
    # Out of the rank's group, once its setsid() has run.
    assert until(lambda: os.getpgid(grandchild) == grandchild)
    ending = end_job([h], reason="after rank 0 failed")
    assert {h.pid, grandchild} <= ending.terminated
    assert ending.note(grandchild) == "ended by ddpkit (SIGTERM) after rank 0 failed"
    assert until(lambda: not is_running(grandchild))


def test_a_rank_that_ignores_sigterm_is_killed_after_the_grace(ranks: Ranks) -> None:
    h = ranks.start(IGNORES_SIGTERM, rank=2)
    assert h.proc.stdout is not None
    assert h.proc.stdout.readline().strip() == b"ready"
    fates = end_all([h], None, no_record, reason="after rank 0 failed", grace=0.3)
    assert fates[0].exitcode == -signal.SIGKILL
    assert fates[0].note == (
        "did not end within 0.3 s of SIGTERM; killed by ddpkit (SIGKILL) after rank 0 failed"
    )


def test_error_files_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "rank3.json"
    write_error_file(path, "Traceback\nKeyError: 'x'", kind="stall", note="n", never_arrived=True)
    record = read_error_file(path)
    assert record == ErrorRecord(
        pid=os.getpid(),
        traceback="Traceback\nKeyError: 'x'",
        kind="stall",
        note="n",
        never_arrived=True,
    )
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    assert read_error_file(tmp_path / "missing.json") is None
    assert raised(record) == "raised KeyError: 'x'"


def test_a_rank_that_left_its_report_counts_as_failed_before_it_exits(
    ranks: Ranks, tmp_path: Path
) -> None:
    healthy, reporting = ranks.start(SLEEPER, rank=0), ranks.start(SLEEPER, rank=1)
    records = {1: ErrorRecord(pid=reporting.pid, traceback="ValueError: x")}
    assert first_failure([healthy, reporting]) is None
    assert first_failure([healthy, reporting], records.get) is reporting


def test_a_rank_that_failed_on_its_own_is_the_root_not_the_one_that_lost_it(
    ranks: Ranks,
) -> None:
    lost_peer, killed = ranks.start(SLEEPER, rank=0), ranks.start(SLEEPER, rank=1)
    records = {0: ErrorRecord(pid=lost_peer.pid, traceback="gloo ...", kind="peer_loss")}
    os.kill(killed.pid, signal.SIGKILL)
    killed.proc.wait()
    # Rank 0 is seen first (lowest rank, it left a report), but it only lost its peer.
    assert first_failure([lost_peer, killed], records.get) is lost_peer
    assert choose_root([lost_peer, killed], lost_peer, records.get) is killed


def test_a_stall_blames_the_rank_that_never_arrived(ranks: Ranks) -> None:
    waited, stalled = ranks.start(SLEEPER, rank=0), ranks.start(SLEEPER, rank=1)
    records = {
        0: ErrorRecord(pid=waited.pid, traceback="stack 0", kind="stall", note="waited"),
        1: ErrorRecord(
            pid=stalled.pid, traceback="stack 1", kind="stall", note="never", never_arrived=True
        ),
    }
    for h in (waited, stalled):
        h.proc.kill()
        h.proc.wait()
    assert choose_root([waited, stalled], waited, records.get, gather=0.1) is stalled
    fates = end_all([waited, stalled], stalled, records.get)
    assert [(f.rank, f.note, f.traceback) for f in fates] == [
        (1, "never", "stack 1"),
        (0, "waited", ""),
    ]


def test_a_rank_that_does_not_answer_the_stall_alarm_never_arrived(ranks: Ranks) -> None:
    waited, silent = ranks.start(SLEEPER, rank=0), ranks.start(SLEEPER, rank=1)
    records = {0: ErrorRecord(pid=waited.pid, traceback="stack 0", kind="stall", note="waited")}
    waited.proc.kill()
    waited.proc.wait()
    root = choose_root([waited, silent], waited, records.get, gather=0.2)
    assert root is silent
    fates = end_all([waited, silent], root, records.get, reason="after rank 1 stalled")
    assert fates[0].rank == 1
    assert fates[0].note == (
        "never arrived and did not answer the stall alarm; ended by ddpkit after rank 1 stalled"
    )


def test_a_stall_waits_for_the_note_of_the_supervising_rank_zero(ranks: Ranks) -> None:
    """Rank zero of the subprocess launcher is the supervising process: its watchdog writes its
    own answer to the alarm only once every other rank answered, and a child may have answered,
    reported and exited by then. The root is chosen once that note is in (or ``gather`` is out),
    so that the report says how rank zero waited."""
    stalled = ranks.start(SLEEPER, rank=1)
    records = {
        1: ErrorRecord(
            pid=stalled.pid, traceback="stack 1", kind="stall", note="never", never_arrived=True
        )
    }
    stalled.proc.kill()
    stalled.proc.wait()
    note: list[str] = []
    threading.Timer(0.3, note.append, ["waited 3.0 s in backward"]).start()
    root = choose_root(
        [stalled], stalled, records.get, others_reported=lambda: bool(note), gather=30
    )
    assert root is stalled
    assert note  # chosen after rank zero's note came in, not before
