"""A started process as its parent sees it, whoever started it: ``subprocess.Popen`` (a
launcher's rank, an isolated test's interpreter), a ``multiprocessing.Process`` (spawn, fork),
a fork this process reaps itself, or a fork the warm-start zygote reaps.

Each rank leads its own process group (the terminal's Ctrl-C reaches the launcher only, which
forwards it; ending the group also ends the rank's own children, such as data-loader workers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ddpkit._runtime.ranks._lifeline import preexec_for_rank
from ddpkit.errors import LaunchError


class Proc(Protocol):
    """What a parent needs of a process it started."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None:
        """The exit code (negative: the signal), or None while running."""


@dataclass
class Rank:
    """One process of a job: its rank, the process, where its output goes (an isolated test's
    process) and when the parent saw it end."""

    rank: int
    proc: Proc
    log: Path | None = None
    ended_at: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def send_signal(self, sig: int) -> None:
        """Signal the rank and, when it leads its own process group, its own children (the
        group) while it runs."""
        # poll() first: once the rank is reaped its pid may belong to someone else.
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(self.pid) == self.pid:  # the rank leads its own process group
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)


class MpProcess:
    """A ``multiprocessing.Process`` (spawn, fork, forkserver) as a :class:`Proc`."""

    def __init__(self, process: Any) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def poll(self) -> int | None:
        code = self.process.exitcode
        return None if code is None else int(code)

    def join(self, timeout: float | None = None) -> None:
        self.process.join(timeout=timeout)


class ForkedChild:
    """A process this one forked itself and reaps (``subprocess.Popen``'s interface)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -signal.SIGKILL  # reaped by someone else: gone
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.01)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


def start_rank(
    command: Sequence[str], env: Mapping[str, str], cannot: str, fix: str
) -> subprocess.Popen[bytes]:
    """:func:`start_popen` for a launcher's rank; a :class:`~ddpkit.errors.LaunchError` that
    says it ``cannot`` start what, and the ``fix``, when the command does not start."""
    try:
        return start_popen(command, env)
    except OSError as err:
        raise LaunchError(f"{cannot} ({' '.join(command)}): {err}. Fix: {fix}") from err


def start_popen(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    log: Path | None = None,
    cwd: Path | None = None,
    pass_fds: Sequence[int] = (),
    new_session: bool = False,
    death_signal: int = signal.SIGTERM,
) -> subprocess.Popen[bytes]:
    """Start ``command``: stdin from /dev/null, output to ``log`` (None: this process's), its
    own process group (``new_session``: its own session, which every process it starts joins)
    and ``death_signal`` when this process dies
    (:func:`ddpkit._runtime.ranks._lifeline.preexec_for_rank`: SIGTERM for a rank, whose handlers
    may end it cleanly; SIGKILL for an isolated test's process). ``OSError`` when it cannot
    start."""
    preexec = preexec_for_rank(os.getpid(), own_group=not new_session, death_signal=death_signal)
    with open(log, "ab") if log is not None else contextlib.nullcontext() as out:
        return subprocess.Popen(
            list(command),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out is not None else None,
            pass_fds=tuple(pass_fds),
            start_new_session=new_session,
            preexec_fn=preexec,
        )
