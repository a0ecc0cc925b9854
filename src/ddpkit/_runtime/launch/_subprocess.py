"""Start the other ranks of this node as subprocesses that re-run the user's command line.

The user's process is local rank 0. For a script started as ``python -u train.py --lr 0.1`` on
node 0 of one, with two devices, rank 1 is started as::

    <sys.executable> -u /abs/path/train.py --lr 0.1

with the parent's environment plus::

    MASTER_ADDR=127.0.0.1  MASTER_PORT=<free port, bound by rank 0>  WORLD_SIZE=2
    NODE_RANK=0  LOCAL_RANK=1  DDPKIT_PARENT_PID=<pid of rank 0>
    DDPKIT_ERROR_FILE=<private 0700 dir>/rank1.json  DDPKIT_STAGE_FILE=<same dir>/rank1.stages

The directory is the launch's scratch directory (:mod:`ddpkit._runtime.ranks._scratch`): 0700, its
files 0600. ``python -m module args`` is re-run as ``python -m module args`` (so ``python -m pytest
tests/x.py::test[a]`` re-runs exactly that test, which is what ``@pytest.mark.standalone`` of
ddpkit's pytest plugin does).

A process that already has its rank from the environment (``LOCAL_RANK``) never launches: its
plan says the ranks were started externally. The children live as long as the script, supervised
all-or-nothing by rank 0 (:mod:`ddpkit._runtime.launch._script_job`); each leads its own process
group, has stdin on /dev/null and ends with rank 0 (parent-death signal, and a thread that watches
its parent).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ddpkit._runtime.launch._base import Launcher
from ddpkit._runtime.launch._pytest_session import check_not_a_pytest_session
from ddpkit._runtime.launch._script_job import job_for, retire_job
from ddpkit._runtime.restart.attempt import Attempt, attempt_in_process
from ddpkit._runtime.restart.attempts import run_attempts
from ddpkit.errors import LaunchError
from ddpkit.plugins.training_type.ddp import DDPPlugin
from ddpkit.utilities._script import has_script

R = TypeVar("R")


def child_command() -> list[str]:
    """The command line that started this process, re-runnable from any working directory.
    Refused for a pytest session (rank 1 would run every test again) unless ddpkit's pytest
    plugin started this process for one test."""
    check_not_a_pytest_session()
    if not has_script():
        raise LaunchError(
            "DDPPlugin re-runs the script for the other ranks, but this session has no script "
            "to re-run (an interactive shell, a notebook or `python -c`). "
            "Fix: pass strategy='ddp_spawn' (spawned ranks), or run the code from a script."
        )
    main = sys.modules["__main__"]
    argv = list(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    tail = len(sys.argv) - 1
    head, args = argv[: len(argv) - tail], argv[len(argv) - tail :]
    head[0] = sys.executable
    if getattr(main, "__spec__", None) is None:
        # `python [opts] script.py`: the script path is the last word of the head.
        head[-1] = os.path.abspath(head[-1])
    return head + args


class SubprocessLauncher(Launcher):
    """Rank 0 is this process; it starts the node's other ranks by re-running the script."""

    name = "subprocess"

    def __init__(self, plugin: DDPPlugin) -> None:
        self.plugin = plugin

    def launch(self, fn: Callable[..., R], *args: Any, max_restarts: int = 0) -> R:
        stage = str(args[0]) if args else "fit"

        def once(attempt: Attempt) -> R:
            job = job_for(self.plugin, child_command, attempt)
            # This process is rank 0 and runs the attempt itself: it learns it in-process.
            with attempt_in_process(attempt) if max_restarts else contextlib.nullcontext():
                return job.run(self.plugin, stage, fn, args)

        rank = self.plugin.node_rank * self.plugin.num_processes
        return run_attempts(once, max_restarts, rank=rank, before_restart=retire_job)
