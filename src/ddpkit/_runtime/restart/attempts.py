"""The launcher's side of a restart: ``launch_once(attempt)`` again after an attempt that failed,
up to ``max_restarts`` times (the contract: the package docstring)."""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Callable
from typing import TypeVar

from ddpkit._runtime.ranks._scratch import make_private_dir
from ddpkit._runtime.restart.attempt import Attempt
from ddpkit._tracebacks import first_line
from ddpkit.errors import ChildFailedError, LaunchError, MisconfigurationError

R = TypeVar("R")


def restart_cause(exc: BaseException, rank: int = 0) -> str | None:
    """The root cause of a failed attempt in one line, or None when it is not one to restart
    (``rank``: the launching process's own rank, when it is one)."""
    if not isinstance(exc, Exception) or isinstance(exc, MisconfigurationError | LaunchError):
        return None  # an interrupt, a StageAbort that escaped, a bad value, nothing started
    if isinstance(exc, ChildFailedError):
        if not exc.failures or exc.root_cause.note.startswith("raised MisconfigurationError"):
            return None
        return exc.root_cause.line()
    return f"rank {rank} (pid {os.getpid()}): raised {first_line(exc)}"


def _attempts_note(max_restarts: int, causes: list[str], used_up: bool) -> str:
    head = (
        f"ddpkit: max_restarts={max_restarts} used up; the root cause of each attempt:"
        if used_up
        else "ddpkit: the root cause of each attempt before this one:"
    )
    return "\n".join([head, *(f"  attempt {k}: {cause}" for k, cause in enumerate(causes))])


def run_attempts(
    launch_once: Callable[[Attempt], R],
    max_restarts: int,
    *,
    rank: int = 0,
    before_restart: Callable[[], None] | None = None,
) -> R:
    """``launch_once(attempt)`` until it returns, restarting a failed attempt up to
    ``max_restarts`` times. ``before_restart`` lets the launcher forget the failed job first."""
    if max_restarts == 0:
        return launch_once(Attempt())
    run_dir = make_private_dir()
    started = time.time()
    causes: list[str] = []
    try:
        for number in itertools.count():
            attempt = Attempt(
                number=number,
                max_restarts=max_restarts,
                cause=causes[-1] if causes else "",
                started=started,
                run_dir=str(run_dir),
            )
            try:
                return launch_once(attempt)
            except BaseException as exc:
                cause = restart_cause(exc, rank)
                if cause is None:
                    if causes:
                        exc.add_note(_attempts_note(max_restarts, causes, used_up=False))
                    raise
                causes.append(cause)
                if number == max_restarts:
                    exc.add_note(_attempts_note(max_restarts, causes, used_up=True))
                    raise
            if before_restart is not None:
                before_restart()
        raise AssertionError("unreachable")  # itertools.count() never ends
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
