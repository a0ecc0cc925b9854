"""Keeping tests apart: no process group and no child process outlives the test that made it.

The plugin's autouse fixture takes a :class:`ChildSnapshot` before each test and, after it,
destroys any process group left behind (:func:`destroy_leaked_process_group`) and ends the child
processes the test left running (:func:`leaked_children`, :func:`end_leaked`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ddpkit._runtime.ranks._names import ENV_PARENT_PID
from ddpkit.utilities import _procs as procs

#: How long children a test started may take to finish exiting after it returns.
CHILD_GRACE_SECONDS = 3.0

# Helpers started once and kept for the life of the interpreter (Python's own, and the warm
# start's zygote, kept for the session): not a test's leak.
_INTERPRETER_HELPERS = (
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
    "multiprocessing.semaphore_tracker",
    "ddpkit.testing._warm_start.zygote",
)


# Helpers this process forked from itself (the warm start's zygote forked from the session):
# their command line is this process's own.
_HELPER_PIDS: set[int] = set()


def note_helper(pid: int) -> None:
    """``pid`` is a child kept for the session (not a test's leak)."""
    _HELPER_PIDS.add(pid)


@dataclass(frozen=True)
class LeakedGroup:
    """The process group a test left initialized (already destroyed)."""

    backend: str
    world_size: int
    rank: int


def destroy_leaked_process_group() -> LeakedGroup | None:
    """Destroy the default process group if one exists and say what it was; None when there
    was none or torch.distributed is unavailable."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not dist.is_available() or not dist.is_initialized():
        return None
    leaked = LeakedGroup(
        backend=str(dist.get_backend()), world_size=dist.get_world_size(), rank=dist.get_rank()
    )
    dist.destroy_process_group()
    return leaked


def leaked_group_message(nodeid: str, group: LeakedGroup) -> str:
    return (
        f"{nodeid} left a torch.distributed process group initialized (backend "
        f"{group.backend}, world size {group.world_size}, rank {group.rank}); ddpkit destroyed "
        f"it after the test. Fix: call torch.distributed.destroy_process_group() before the "
        f"test returns (or use @pytest.mark.distributed, which does it for you)."
    )


@dataclass(frozen=True)
class LeakedChild:
    pid: int
    command: str
    ddpkit_rank: bool
    """True for a rank ddpkit's subprocess launcher started (it has ``DDPKIT_PARENT_PID``)."""


class ChildSnapshot:
    """The running children of this process when a test starts."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = os.getpid() if pid is None else pid
        self.before = frozenset(p.pid for p in procs.children(self.pid))


def _is_interpreter_helper(pid: int) -> bool:
    if pid in _HELPER_PIDS:
        return True
    command = procs.cmdline(pid)
    return any(helper in command for helper in _INTERPRETER_HELPERS)


def _launched_by(pid: int, parent: int) -> bool:
    return procs.environ(pid).get(ENV_PARENT_PID) == str(parent)


def leaked_children(
    snapshot: ChildSnapshot,
    *,
    grace: float = CHILD_GRACE_SECONDS,
    allow_ddpkit_ranks: bool = False,
) -> list[LeakedChild]:
    """Children started since ``snapshot`` that still run after ``grace`` seconds.

    ``allow_ddpkit_ranks``: in a standalone test's own interpreter, the ranks ddpkit's launcher
    started are joined by the launcher when the interpreter exits, and the parent collects
    their results; they are not leaks there.
    """

    def new() -> list[int]:
        return [
            p.pid
            for p in procs.children(snapshot.pid)
            if p.pid not in snapshot.before
            and not _is_interpreter_helper(p.pid)
            and not (allow_ddpkit_ranks and _launched_by(p.pid, snapshot.pid))
        ]

    deadline = time.monotonic() + grace
    pids = new()
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = new()
    return [
        LeakedChild(
            pid=pid, command=procs.cmdline(pid), ddpkit_rank=_launched_by(pid, snapshot.pid)
        )
        for pid in pids
    ]


def end_leaked(children: Iterable[LeakedChild]) -> None:
    """End the leaked children (SIGTERM, then SIGKILL) so that the next test starts clean."""
    procs.end_processes([c.pid for c in children], grace=1.0)


def leaked_children_message(nodeid: str, children: list[LeakedChild]) -> str:
    lines = [
        f"{nodeid} left {len(children)} child process{'es' if len(children) > 1 else ''} "
        f"running {CHILD_GRACE_SECONDS:g} s after it returned; ddpkit ended "
        f"{'them' if len(children) > 1 else 'it'}:"
    ]
    lines += [f"  pid {c.pid}: {c.command or '?'}" for c in children]
    if any(c.ddpkit_rank for c in children):
        lines.append(
            "Fix: a Trainer with DDPPlugin re-runs the command line for its other ranks; mark "
            "the test @pytest.mark.standalone so that they re-run this test alone."
        )
    else:
        lines.append(
            "Fix: wait for the processes the test starts (Popen.wait(), Process.join()) "
            "before it returns."
        )
    return "\n".join(lines)
