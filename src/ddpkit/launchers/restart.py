"""Where a job that ended badly starts again (``Trainer(max_restarts=N)``).

The job ends as it always does (:mod:`ddpkit.launchers.supervisor`: every rank ended, the root
cause known). If it was a fit and a rank failed — it raised, was killed, stalled, exited — the
launch runs again as a new job: new ranks (for the subprocess launcher new children; rank 0 is
the launching process, which runs the fit again itself), a fresh rendezvous (a new port and a
new key), and the attempt in every rank's environment (:class:`~ddpkit.ranks.restart.Attempt`:
``TORCHELASTIC_RESTART_COUNT=k``, as torchrun sets it). Rank 0 of the new job then resumes from
the newest complete checkpoint (:mod:`ddpkit.ranks.restart`) and prints one line naming the
cause and the checkpoint. Up to ``max_restarts`` times.

Never restarted: an interrupt (SIGINT / SIGTERM to the launching process), a
``MisconfigurationError`` (on any rank: it would fail the same way again) or a ``LaunchError``
(nothing could start). When the restarts are used up, the last attempt's error is raised with
a note naming every attempt's root cause.

The run folder (``DDPKIT_RUN_DIR``, private like the scratch directories and swept the same way)
lives as long as the launch: ddpkit keeps its own checkpoint there when the fit has no
``ModelCheckpoint``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Callable
from typing import TypeVar

from ddpkit.errors import ChildFailedError, LaunchError, MisconfigurationError
from ddpkit.launchers.report import first_line
from ddpkit.ranks.restart import Attempt
from ddpkit.ranks.scratch import make_private_dir

__all__ = ["restart_cause", "run_attempts"]

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
    ``max_restarts`` times (see the module docstring). ``before_restart`` lets the launcher
    forget the failed job first."""
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
