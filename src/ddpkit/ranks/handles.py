"""Handles on the rank processes a supervisor started (a launcher's ranks, an isolated test's
interpreters): poll them, signal them and their children.

Each rank leads its own process group (the terminal's Ctrl-C reaches the launcher only, which
forwards it; ending the group also ends the rank's own children, such as data-loader workers).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["PopenHandle", "ProcessHandle", "RankHandle", "StartedProcess", "signal_group"]


class RankHandle(Protocol):
    rank: int

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None:
        """The exit code (negative: the signal), or None while running."""

    def send_signal(self, sig: int) -> None:
        """Signal the rank and its own children (its process group) while it runs."""


def signal_group(pid: int, sig: int) -> None:
    """Signal ``pid`` and, when it leads its own process group, the whole group."""
    try:
        if os.getpgid(pid) == pid:  # the rank leads its own process group
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


class StartedProcess(Protocol):
    """A process the supervisor started itself: a ``subprocess.Popen``, or a fork it watches
    (an isolated test's process forked by the warm-start zygote)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...


@dataclass
class PopenHandle:
    """A rank the supervisor started itself, leading its own process group."""

    rank: int
    proc: StartedProcess

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def send_signal(self, sig: int) -> None:
        # poll() first: once the rank is reaped its pid may belong to someone else.
        if self.proc.poll() is None:
            signal_group(self.proc.pid, sig)


@dataclass
class ProcessHandle:
    """A ``multiprocessing.Process`` (spawn); the rank moves to its own process group at start."""

    rank: int
    proc: Any

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def poll(self) -> int | None:
        code = self.proc.exitcode
        return None if code is None else int(code)

    def send_signal(self, sig: int) -> None:
        if self.proc.exitcode is None:
            signal_group(self.proc.pid, sig)
