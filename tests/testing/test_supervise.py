"""The parent's supervision of an isolated test's interpreters, with real (torch-free) processes
that follow the child contract by hand: register, report, print, hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ddpkit.testing._supervise import Job, condensed_stacks, tail
from ddpkit.testing._worker import ENV_DIR
from ddpkit.utilities import _procs as procs

# What IsolatedProcess.start() and the plugin's reporter do, without importing ddpkit (and torch).
PRELUDE = textwrap.dedent(
    """
    import faulthandler, json, os, signal, subprocess, sys, time
    directory = os.environ["DDPKIT_TESTING_DIR"]
    def register(rank, log):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        with open(os.path.join(directory, f"proc-{os.getpid()}.json"), "w") as fh:
            json.dump({"pid": os.getpid(), "rank": rank, "log": log}, fh)
    def report(outcome):
        with open(os.path.join(directory, f"report-{os.getpid()}.jsonl"), "a") as fh:
            for when in ("setup", "call", "teardown"):
                fh.write(json.dumps({"when": when, "outcome": outcome}) + "\\n")
    """
)


def start(job: Job, tmp_path: Path, rank: int, body: str) -> None:
    log = tmp_path / f"rank{rank}.log"
    code = PRELUDE + f"register({rank}, {str(log)!r})\n" + textwrap.dedent(body)
    env = {**os.environ, ENV_DIR: str(tmp_path)}
    job.start(rank, [sys.executable, "-c", code], env, cwd=tmp_path, log=log)


def test_a_process_that_passes(tmp_path: Path) -> None:
    job = Job(tmp_path)
    start(job, tmp_path, 0, "print('hello'); report('passed')")
    end = job.wait(timeout=60)
    assert not end.timed_out and end.leftover == ()
    (p,) = end.processes
    assert (p.rank, p.direct, p.exitcode, p.ended_by_ddpkit) == (0, True, 0, False)
    assert p.output == "hello"
    assert p.record is not None and [r["outcome"] for r in p.record.reports] == ["passed"] * 3


def test_a_timeout_ends_the_tree_after_each_process_dumped_its_stacks(tmp_path: Path) -> None:
    job = Job(tmp_path)
    start(
        job,
        tmp_path,
        0,
        """
        def hang_here():
            print("about to hang", flush=True)
            time.sleep(120)
        hang_here()
        """,
    )
    end = job.wait(timeout=3)
    assert end.timed_out and end.timeout == 3
    (p,) = end.processes
    assert p.ended_by_ddpkit and p.exitcode is not None and p.exitcode < 0
    assert p.output.endswith("about to hang")
    assert p.stacks.startswith("Current thread")
    assert "in hang_here" in p.stacks.splitlines()[1]
    assert not procs.is_running(p.pid)


def test_after_one_rank_fails_the_others_are_ended(tmp_path: Path) -> None:
    job = Job(tmp_path)
    start(job, tmp_path, 0, "time.sleep(120)")
    start(job, tmp_path, 1, "print('rank 1 fails'); sys.exit(3)")
    end = job.wait(timeout=120, fail_grace=0.2)
    assert not end.timed_out
    rank0, rank1 = end.processes
    assert (rank0.rank, rank0.ended_by_ddpkit) == (0, True)
    assert (rank1.rank, rank1.exitcode, rank1.ended_by_ddpkit) == (1, 3, False)
    assert rank1.ended_at <= rank0.ended_at
    assert not procs.is_running(rank0.pid)


def test_processes_left_running_are_listed_and_ended(tmp_path: Path) -> None:
    job = Job(tmp_path)
    start(
        job,
        tmp_path,
        0,
        """
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open(os.path.join(directory, "orphan"), "w").write(str(p.pid))
        report("passed")
        """,
    )
    end = job.wait(timeout=60)
    orphan = int((tmp_path / "orphan").read_text())
    assert end.leftover == (f"{orphan}: {sys.executable} -c import time; time.sleep(120)",)
    assert not procs.is_running(orphan)


def test_ranks_the_test_started_are_gathered_too(tmp_path: Path) -> None:
    job = Job(tmp_path)
    start(
        job,
        tmp_path,
        0,
        f"""
        code = {PRELUDE!r} + "register(1, os.path.join(directory, 'r1.log')); report('failed')"
        subprocess.run([sys.executable, "-c", code], check=False)
        report("passed")
        """,
    )
    end = job.wait(timeout=60)
    rank0, rank1 = end.processes
    assert (rank0.direct, rank1.direct, rank1.rank, rank1.exitcode) == (True, False, 1, None)
    assert rank1.record is not None and rank1.record.reports[1]["outcome"] == "failed"
    assert rank1.log == tmp_path / "r1.log"


def test_tail(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert tail(log, 3) == "line 97\nline 98\nline 99"
    assert tail(log, 2, end=len("line 0\nline 1\nline 2\n")) == "line 1\nline 2"
    assert tail(tmp_path / "missing") == ""


def test_condensed_stacks_put_the_signalled_thread_first_and_cut_deep_stacks() -> None:
    dump = "\n".join(
        [
            "Thread 0x01 (most recent call first):",
            '  File "w.py", line 1 in watch',
            "",
            "Current thread 0x02 (most recent call first):",
            *(f'  File "t.py", line {i} in f{i}' for i in range(12)),
            "",
        ]
    )
    assert condensed_stacks(dump, frames=2).splitlines() == [
        "Current thread 0x02 (most recent call first):",
        '  File "t.py", line 0 in f0',
        '  File "t.py", line 1 in f1',
        "  ...",
        "Thread 0x01 (most recent call first):",
        '  File "w.py", line 1 in watch',
    ]
    assert json.dumps(condensed_stacks("no dump here")) == '""'


def test_an_interpreter_dies_with_the_parent_pytest(tmp_path: Path) -> None:
    # A parent killed outright (kill -9, pytest-timeout's thread method) leaves no test behind.
    parent = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        from ddpkit.testing._supervise import Job
        job = Job(Path({str(tmp_path)!r}))
        job.start(0, [sys.executable, "-c", "import time; time.sleep(120)"], dict(os.environ),
                  cwd=Path("."), log=Path({str(tmp_path / "log")!r}))
        print(job.pids[0], flush=True)
        os._exit(0)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", parent], capture_output=True, text=True, check=True, timeout=120
    )
    orphan = int(out.stdout)
    deadline = time.monotonic() + 30
    while procs.is_running(orphan) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.is_running(orphan)
