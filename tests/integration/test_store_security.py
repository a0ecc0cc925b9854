"""A stranger on the same machine connects to a running job's rendezvous store (it has no
authentication, and its port is in ``/proc/net/tcp`` for anyone to see) and writes every key a
ddpkit job used to keep at a guessable name — the stall alarm of each stage, the process group's
rendezvous — over and over while the job trains. The job's keys live under a prefix only its
ranks know: it finishes as if nobody had connected, with the same weights.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import threading
import time
from pathlib import Path

import pytest
import torch
from fault_scripts.restarts import assert_equal_weights, restart_run

from ddpkit.utilities._procs import cmdline, process_table

pytestmark = pytest.mark.timeout(200)

#: every key a job of ddpkit's kept at a fixed name before it had a key of its own: the stall
#: alarm of stages 1-3 (process groups 0-3 of a rank; restart count 0) and the group's rendezvous
#: (each torch PrefixStore joins its prefix with a "/")
GUESSES = [
    f"ddpkit/stage{stage}//{group}//{key}"
    for stage in (1, 2, 3)
    for group in range(4)
    for key in (f"ddpkit/stall/0/{stage}/alarm", "rank_1", "0")
]


class Stranger(threading.Thread):
    """Finds the store of the run (a listening socket of a process running ``script``),
    connects, and writes the guessable keys until stopped."""

    def __init__(self, script: str) -> None:
        super().__init__(daemon=True)
        self.script = script
        self.stop = threading.Event()
        self.writes = 0
        self.connected_at: float | None = None

    def _store_port(self) -> int | None:
        """The port of the run's store: rank 0's first listening socket (the lowest inode: it
        binds the store's before any rank starts; gloo's come later, in another protocol)."""
        pids = {p for p in process_table() if self.script in cmdline(p, limit=100_000)}
        table = process_table()
        rank_zero = [p for p in pids if p in table and table[p].ppid not in pids]
        if len(rank_zero) != 1:
            return None
        inodes: set[str] = set()
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{rank_zero[0]}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
        listening = []
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:  # 0A: LISTEN
                listening.append((int(parts[9]), int(parts[1].split(":")[1], 16)))
        return min(listening)[1] if listening else None

    def run(self) -> None:
        import torch.distributed as dist

        stores = {}
        while not self.stop.is_set():
            port = self._store_port() if not stores else None
            if port is not None and port not in stores:
                try:
                    stores[port] = dist.TCPStore(  # type: ignore[attr-defined]
                        "127.0.0.1",
                        port,
                        None,
                        False,
                        datetime.timedelta(seconds=2),
                        wait_for_workers=False,
                    )
                except (RuntimeError, OSError):
                    continue
                self.connected_at = self.connected_at or time.time()
            for store in list(stores.values()):
                for key in GUESSES:
                    try:
                        store.set(key, "1 3 backward")  # "rank 1 waited in collective #3"
                        self.writes += 1
                    except (RuntimeError, OSError):
                        break
            time.sleep(0.02)


@pytest.mark.xdist_group("restart-reference")
def test_a_stranger_connected_to_the_store_changes_nothing(
    tmp_path: Path, reference: dict[str, torch.Tensor]
) -> None:
    stranger = Stranger(str(tmp_path / "run"))  # the run's own --root is in its command line
    stranger.start()
    try:
        # 12 steps of 0.25 s: the job trains for 3 s more than its own 2 s, so that the stranger,
        # which finds the store by reading the process table and may lose a 2 s connect to a
        # socket that is not the store's, reaches it while the job trains on a loaded machine.
        run, out = restart_run("subprocess", tmp_path, "--step-delay", "0.25", fault="none")
    finally:
        stranger.stop.set()
        stranger.join(timeout=30)
    assert stranger.connected_at is not None, "the stranger never reached the store"
    assert stranger.writes > len(GUESSES), "the stranger wrote nothing while the job ran"
    assert run.returncode == 0, run.stderr
    assert "stall" not in run.stderr
    finished = [t for t, line in run.stamps if "ddpkit-fault: finished" in line]
    assert stranger.connected_at < finished[0]  # connected while the job trained
    assert_equal_weights(out, reference)
