"""A rank never outlives its launcher: the parent-death signal, and the watcher thread for a rank
whose SIGTERM handling does not end it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ddpkit.utilities._procs import is_running

pytestmark = pytest.mark.timeout(60)

#: a launcher: starts one rank as ddpkit does, prints its pid, waits to be killed
PARENT = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from ddpkit._runtime.ranks._lifeline import preexec_for_rank
    rank = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())],
                            preexec_fn=preexec_for_rank(os.getpid()), stdout=subprocess.PIPE)
    print(rank.stdout.readline().decode().strip(), flush=True)
    while True:
        time.sleep(0.1)
    """
)
PLAIN_RANK = "import os, time\nprint(os.getpid(), flush=True)\nwhile True: time.sleep(0.1)"
#: a rank whose own SIGTERM handler does not end it (as a user's graceful-shutdown flag would)
STUBBORN_RANK = textwrap.dedent(
    """
    import os, signal, sys, time
    from ddpkit._runtime.ranks._lifeline import watch_parent
    signal.signal(signal.SIGTERM, lambda *_: None)
    watch_parent(int(sys.argv[1]))
    print(os.getpid(), flush=True)
    while True:
        time.sleep(0.1)
    """
)


def orphan_after_parent_dies(rank_code: str) -> tuple[int, bool]:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, rank_code], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert parent.stdout is not None
        rank = int(parent.stdout.readline())
        assert os.getpgid(rank) == rank  # the rank leads its own process group
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 20  # hang guard; the rank goes within moments
        while is_running(rank) and time.monotonic() < deadline:
            time.sleep(0.05)
        still = is_running(rank)
        if still:
            os.kill(rank, signal.SIGKILL)
        return rank, still
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_rank_ends_when_its_launcher_is_killed() -> None:
    _, still_alive = orphan_after_parent_dies(PLAIN_RANK)
    assert not still_alive


def test_a_rank_that_survives_sigterm_is_ended_by_its_parent_watcher() -> None:
    _, still_alive = orphan_after_parent_dies(STUBBORN_RANK)
    assert not still_alive
