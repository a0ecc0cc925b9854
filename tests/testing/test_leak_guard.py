"""The leak checks on their own: a real gloo group, real child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import torch.distributed as dist

from ddpkit.testing import _leaks as leaks
from ddpkit.utilities import _procs as procs


def test_a_leaked_group_is_destroyed_and_described() -> None:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    leaked = leaks.destroy_leaked_process_group()
    assert leaked == leaks.LeakedGroup(backend="gloo", world_size=1, rank=0)
    assert not dist.is_initialized()
    assert leaks.destroy_leaked_process_group() is None
    message = leaks.leaked_group_message("tests/t.py::test_a", leaked)
    assert message.startswith(
        "tests/t.py::test_a left a torch.distributed process group initialized "
        "(backend gloo, world size 1, rank 0); ddpkit destroyed it"
    )
    assert "Fix: call torch.distributed.destroy_process_group()" in message


def test_a_child_left_running_is_reported_and_ended() -> None:
    snapshot = leaks.ChildSnapshot()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        leaked = leaks.leaked_children(snapshot, grace=0.2)
        assert [c.pid for c in leaked] == [proc.pid]
        assert not leaked[0].ddpkit_rank
        message = leaks.leaked_children_message("t.py::test_b", leaked)
        assert "t.py::test_b left 1 child process running 3 s after it returned" in message
        assert f"pid {proc.pid}: {sys.executable} -c import time; time.sleep(120)" in message
        assert "Fix: wait for the processes the test starts" in message
        leaks.end_leaked(leaked)
        assert not procs.is_running(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_a_child_that_exits_within_the_grace_is_no_leak() -> None:
    snapshot = leaks.ChildSnapshot()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    try:
        assert leaks.leaked_children(snapshot, grace=30) == []
    finally:
        proc.wait()


def test_children_from_before_the_test_are_not_its_leak() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        assert leaks.leaked_children(leaks.ChildSnapshot(), grace=0) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_ddpkit_rank_is_named_and_allowed_where_the_launcher_joins_it() -> None:
    env = {**os.environ, "DDPKIT_PARENT_PID": str(os.getpid())}
    snapshot = leaks.ChildSnapshot()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
    try:
        # Until the child has exec'd, /proc shows the fork's command line (empty) and the
        # environment it inherited, without DDPKIT_PARENT_PID: what ddpkit reads is the exec'd
        # process's (flaky on a loaded machine otherwise).
        deadline = time.monotonic() + 30
        while "time.sleep" not in procs.cmdline(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert leaks.leaked_children(snapshot, grace=0, allow_ddpkit_ranks=True) == []
        leaked = leaks.leaked_children(snapshot, grace=0)
        assert [c.ddpkit_rank for c in leaked] == [True]
        assert "mark the test @pytest.mark.standalone" in leaks.leaked_children_message(
            "t.py::test_c", leaked
        )
    finally:
        proc.kill()
        proc.wait()
