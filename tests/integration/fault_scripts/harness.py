"""Run :mod:`faulty_run` in a fresh session, inject a fault, and watch the whole process tree.

The run starts in a new session (``start_new_session``): every process it ever starts (ranks,
their helpers) keeps that session id, whatever process group it moves to and whoever adopts it
when its parent dies. "The job ended" means no live process of the session is left; the
survivors, if any, are killed afterwards and reported by pid.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ddpkit.utilities._procs import process_table

__all__ = ["SCRIPT", "FaultRun", "listening_sockets", "run_fault", "session_pids"]

SCRIPT = Path(__file__).with_name("faulty_run.py")
_FAULT_LINE = re.compile(r"ddpkit-fault: fault \w+ rank \d+ at (?P<t>[0-9.]+)")
_RANK_LINE = re.compile(r"ddpkit-fault: rank (?P<rank>\d+) pid (?P<pid>\d+)")


def session_pids(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``."""
    return sorted(p.pid for p in process_table().values() if p.sid == sid and p.running)


def listening_sockets(pids: list[int]) -> list[tuple[str, int, int]]:
    """(local address, port, pid) of every TCP socket in LISTEN state that ``pids`` hold."""
    inodes: dict[str, int] = {}
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            for fd in fd_dir.iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, state, inode = parts[1], parts[3], parts[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            hex_addr, hex_port = local.split(":")
            found.append((_address(hex_addr, width), int(hex_port, 16), inodes[inode]))
    return found


def _address(hex_addr: str, width: int) -> str:
    raw = bytes.fromhex(hex_addr)
    if width == 8:
        return ".".join(str(b) for b in raw[::-1])
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
    flat = b"".join(words)
    import ipaddress

    return str(ipaddress.IPv6Address(flat))


@dataclass
class FaultRun:
    """What one faulty run did."""

    returncode: int | None
    stdout: str
    stderr: str
    #: when the fault happened (time.time()): the faulting rank's own line, or the harness's
    #: signal to the parent
    fault_at: float | None
    #: when the last process of the session was gone (time.time()); None if it never was
    ended_at: float | None
    #: the pid of each rank, from the ranks' own lines
    ranks: dict[int, int] = field(default_factory=dict)
    #: processes of the session still alive after the run (killed by the harness since)
    survivors: list[int] = field(default_factory=list)
    #: listening TCP sockets of the session seen while it trained
    listening: list[tuple[str, int, int]] = field(default_factory=list)
    timed_out: bool = False
    #: what the run left in its TMPDIR
    litter: list[str] = field(default_factory=list)
    #: each stderr line with the time it arrived (time.time())
    stamps: list[tuple[float, str]] = field(default_factory=list)
    #: the launching process (the script: rank 0 with subprocess, the parent with spawn)
    pid: int | None = None

    @property
    def seconds_to_end(self) -> float | None:
        if self.fault_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.fault_at

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_fault(
    launcher: str,
    fault: str,
    rank: int = 1,
    *,
    signal_parent: int | None = None,
    stall_timeout: float | None = None,
    timeout: float = 90.0,
    env: Mapping[str, str] | None = None,
    tmpdir: Path | None = None,
    extra: tuple[str, ...] = (),
    wrap: tuple[str, ...] = (),
    python: bool = True,
    watch_sockets: bool = False,
    script: Path = SCRIPT,
) -> FaultRun:
    """Run the script; for ``signal_parent``, send that signal to the launching process once
    rank ``rank`` reports it is training (use ``fault="none"``). ``tmpdir`` becomes the run's
    ``TMPDIR``: whatever is left in it afterwards is :attr:`FaultRun.litter`. ``script`` is
    another script that speaks the same arguments and lines (the Lightning one, say). ``python``
    False: ``wrap`` is a launcher that runs the script with its own interpreter (``ddpkit run``)."""
    interpreter = [sys.executable] if python else []
    command = [*wrap, *interpreter, str(script), "--launcher", launcher, "--fault", fault]
    command += ["--rank", str(rank), *extra]
    if stall_timeout is not None:
        command += ["--stall-timeout", str(stall_timeout)]
    run_env = dict(env if env is not None else os.environ)
    if tmpdir is not None:
        run_env["TMPDIR"] = str(tmpdir)
        # torch's own compile cache would otherwise land in TMPDIR (DDP imports dynamo); it is
        # torch's, not a leftover of the run, so it goes elsewhere.
        run_env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(tmpdir.parent / "torchinductor"))
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=run_env,
        start_new_session=True,
    )
    sid = proc.pid
    out_chunks: list[str] = []
    err_lines: list[str] = []
    stamps: list[tuple[float, str]] = []
    ready = threading.Event()
    fault_at: list[float] = []

    def read_err() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            err_lines.append(line)
            stamps.append((time.time(), line))
            if "ddpkit-fault: ready" in line:
                ready.set()
            m = _FAULT_LINE.search(line)
            if m:
                fault_at.append(float(m.group("t")))

    def read_out() -> None:
        assert proc.stdout is not None
        out_chunks.append(proc.stdout.read().decode(errors="replace"))

    readers = [threading.Thread(target=read_err), threading.Thread(target=read_out)]
    for t in readers:
        t.start()
    deadline = time.monotonic() + timeout
    listening: list[tuple[str, int, int]] = []
    timed_out = False
    if signal_parent is not None:
        while not ready.wait(0.05):
            if time.monotonic() > deadline or proc.poll() is not None:
                break
        if ready.is_set():
            if watch_sockets:
                listening = listening_sockets(session_pids(sid))
            fault_at.append(time.time())
            os.kill(proc.pid, signal_parent)
    elif watch_sockets:
        while not ready.wait(0.05):
            if time.monotonic() > deadline or proc.poll() is not None:
                break
        listening = listening_sockets(session_pids(sid))
    ended_at: float | None = None
    while time.monotonic() < deadline:
        if proc.poll() is None:
            # While the launching process runs, the job has not ended: wait for it without
            # reading the process table every few ms (that read cost the harness about a sixth
            # of a core for the whole run). It goes last, or first with the others following.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
            continue
        if not session_pids(sid):
            ended_at = time.time()
            break
        time.sleep(0.01)
    else:
        timed_out = True
    survivors = session_pids(sid)
    for pid in survivors:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    for t in readers:
        t.join(timeout=10)
    # Ranks write to one pipe: their lines can interleave, so search the whole text.
    ranks = {
        int(m.group("rank")): int(m.group("pid")) for m in _RANK_LINE.finditer("".join(err_lines))
    }
    return FaultRun(
        returncode=proc.returncode,
        stdout="".join(out_chunks),
        stderr="".join(err_lines),
        fault_at=fault_at[0] if fault_at else None,
        ended_at=ended_at,
        ranks=ranks,
        survivors=survivors,
        listening=listening,
        timed_out=timed_out,
        stamps=stamps,
        pid=proc.pid,
        litter=sorted(p.name for p in tmpdir.iterdir()) if tmpdir is not None else [],
    )
