"""/proc, read for real: this process, its children, a whole tree, and ending it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ddpkit.utilities import _procs as procs


def test_read_proc_of_this_process() -> None:
    me = procs.read_proc(os.getpid())
    assert me is not None
    assert (me.pid, me.ppid, me.pgid, me.sid) == (
        os.getpid(),
        os.getppid(),
        os.getpgid(0),
        os.getsid(0),
    )
    assert me.running
    # field 22 of /proc/<pid>/stat, read here on its own
    fields = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()
    assert me.start == int(fields[19]) > 0


def test_a_pid_that_does_not_exist() -> None:
    assert procs.read_proc(2**22 + 1) is None
    assert not procs.is_running(2**22 + 1)
    assert procs.cmdline(2**22 + 1) == ""
    assert procs.environ(2**22 + 1) == {}


def test_children_cmdline_and_environ(sleeper: subprocess.Popen[bytes]) -> None:
    assert sleeper.pid in {p.pid for p in procs.children(os.getpid())}

    # the kernel's per-thread list and a scan of every process agree (on who the children are:
    # a child's state may change between the two reads)
    def who(infos: list[procs.ProcInfo]) -> list[tuple[int, int, int]]:
        return [(p.pid, p.ppid, p.start) for p in infos]

    assert who(procs.children(os.getpid())) == who(
        procs.children(os.getpid(), procs.process_table())
    )
    assert procs.cmdline(sleeper.pid).endswith("import time; time.sleep(120)")
    assert procs.environ(sleeper.pid).get("PATH") == os.environ.get("PATH")


def test_a_zombie_is_not_running() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while procs.is_running(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    info = procs.read_proc(proc.pid)  # exited, not yet reaped
    assert info is not None and info.state == "Z"
    assert proc.pid not in {p.pid for p in procs.children(os.getpid())}
    proc.wait()


def test_tree_finds_an_orphaned_grandchild_by_its_session_and_ends_it() -> None:
    # The session leader starts a grandchild and exits at once: the grandchild is handed to
    # init, so only its session links it to the job.
    code = (
        "import subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "print(p.pid, flush=True)"
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True
    )
    assert leader.stdout is not None
    grandchild = int(leader.stdout.readline())
    leader.wait()
    leader.stdout.close()
    try:
        assert procs.is_running(grandchild)
        assert procs.tree([leader.pid]) == {grandchild}
        assert procs.end_processes([grandchild], grace=2.0) == set()  # SIGTERM sufficed
        assert not procs.is_running(grandchild)
    finally:
        procs.send_signal(grandchild, signal.SIGKILL)


def test_end_processes_kills_what_ignores_sigterm() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(120)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    try:
        assert procs.end_processes([proc.pid], grace=0.3) == {proc.pid}
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_end_processes_never_ends_this_process() -> None:
    assert procs.end_processes([os.getpid()], grace=0) == set()
