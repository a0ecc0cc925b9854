"""Processes seen through ``/proc``: whose child a process is, which session it belongs to, and
ending a whole tree of them.

Linux only. Where ``/proc`` is missing the table is empty: the leak check sees no children and a
tree is ended through its process group alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ProcInfo:
    """One line of ``/proc/<pid>/stat``, the fields ddpkit needs."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    """``R``, ``S``, ``D``, ``T``, ...; ``Z`` (zombie) and ``X`` (dead) are not running."""
    start: int
    """When it started, in clock ticks since boot: with the pid, it names one process (a pid
    is reused, a start time under it is not)."""

    @property
    def running(self) -> bool:
        return self.state not in ("Z", "X")


def read_proc(pid: int) -> ProcInfo | None:
    """The process ``pid``, or None when there is no such process (or no ``/proc``)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name sits in parentheses and may hold spaces and parentheses itself: the
    # fields that follow start after the *last* ')'.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return ProcInfo(
            pid=pid,
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            state=fields[0],
            start=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def started_at(pid: int) -> float | None:
    """When ``pid`` started, on the wall clock (``time.time()``); None without ``/proc``."""
    info = read_proc(pid)
    if info is None:
        return None
    try:
        stat = (_PROC / "stat").read_text()
        boot = next(int(line.split()[1]) for line in stat.splitlines() if line.startswith("btime"))
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration):
        return None
    return boot + info.start / ticks


def is_gone(pid: int, start: int | None) -> bool:
    """True only when the process ``pid`` that started at ``start`` (clock ticks since boot, as
    :attr:`ProcInfo.start` says; None: not known) certainly no longer runs: no such process, a
    zombie, or a newer process under the same pid. With no start time, a pid that answers is
    taken to be alive (a reused pid then counts as alive, which is the safe mistake)."""
    info = read_proc(pid)
    if start is not None:
        return info is None or not info.running or info.start != start
    if info is not None:
        return not info.running
    return not _kernel_knows(pid)


def _kernel_knows(pid: int) -> bool:
    """Without ``/proc``, ask the kernel: True while a process runs under ``pid``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: a process runs under that pid (not ours, but alive)
        return True
    return True


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; elsewhere every core)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def process_table() -> dict[int, ProcInfo]:
    """Every process this user can see, by pid."""
    try:
        names = os.listdir(_PROC)
    except OSError:
        return {}
    infos = (read_proc(int(name)) for name in names if name.isdigit())
    return {info.pid: info for info in infos if info is not None}


def is_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    info = read_proc(pid)
    if info is not None:
        return info.running
    return not _PROC.is_dir() and _kernel_knows(pid)


def _listed_children(pid: int) -> set[int] | None:
    """The children the kernel lists under each thread of ``pid`` (no scan of every process);
    None where the kernel does not list them."""
    found: set[int] = set()
    task_dir = _PROC / str(pid) / "task"
    try:
        tasks = os.listdir(task_dir)
    except OSError:
        return None
    for tid in tasks:
        try:
            found.update(int(c) for c in (task_dir / tid / "children").read_text().split())
        except FileNotFoundError:
            if (task_dir / tid).exists():
                return None  # a kernel without CONFIG_PROC_CHILDREN
            # else: the thread ended while we looked
        except (OSError, ValueError):
            continue
    return found


def children(pid: int, table: Mapping[int, ProcInfo] | None = None) -> list[ProcInfo]:
    """The running (not zombie) children of ``pid``."""
    if table is None:
        listed = _listed_children(pid)
        if listed is not None:
            infos = (read_proc(child) for child in sorted(listed))
            return [p for p in infos if p is not None and p.ppid == pid and p.running]
        table = process_table()
    return sorted((p for p in table.values() if p.ppid == pid and p.running), key=lambda p: p.pid)


def tree(roots: Iterable[int], table: Mapping[int, ProcInfo] | None = None) -> set[int]:
    """The running processes of a job: ``roots``, their descendants, and every member of the
    sessions and process groups the roots lead (which catches descendants whose parent already
    died and that were handed to init)."""
    table = process_table() if table is None else table
    roots = set(roots)
    found = {pid for pid in roots if pid in table and table[pid].running}
    found |= {p.pid for p in table.values() if p.running and (p.sid in roots or p.pgid in roots)}
    by_parent: dict[int, list[int]] = {}
    for p in table.values():
        by_parent.setdefault(p.ppid, []).append(p.pid)
    todo = list(found | roots)
    while todo:
        for child in by_parent.get(todo.pop(), ()):
            if child not in found and table[child].running:
                found.add(child)
                todo.append(child)
    return found


def cmdline(pid: int, limit: int = 200) -> str:
    """The command line of ``pid`` as one string (shortened to ``limit``), or '' if gone."""
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def environ(pid: int) -> dict[str, str]:
    """The environment ``pid`` started with (empty when unreadable)."""
    try:
        raw = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0"))
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, sep, v in pairs if sep}


def send_signal(pid: int, sig: int) -> None:
    """Send ``sig`` to ``pid``; a process that is gone (or not ours) is skipped."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def end_processes(pids: Iterable[int], grace: float = 2.0) -> set[int]:
    """SIGTERM each process, SIGKILL what still runs after ``grace`` seconds, and wait (at most a
    few seconds) until none runs. Returns the pids that needed SIGKILL."""
    pids = {pid for pid in pids if pid != os.getpid()}
    for pid in pids:
        send_signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(is_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
    killed = {pid for pid in pids if is_running(pid)}
    for pid in killed:
        send_signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(is_running(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
    return killed
