"""Start the other ranks of this node as subprocesses that re-run the user's command line.

The user's process is local rank 0. For a script started as ``python -u train.py --lr 0.1`` on
node 0 of one, with two devices, rank 1 is started as::

    <sys.executable> -u /abs/path/train.py --lr 0.1

with the parent's environment plus::

    MASTER_ADDR=127.0.0.1  MASTER_PORT=<free port, bound by rank 0>  WORLD_SIZE=2
    NODE_RANK=0  LOCAL_RANK=1  DDPKIT_PARENT_PID=<pid of rank 0>

``python -m module args`` is re-run as ``python -m module args`` (so ``python -m pytest
tests/x.py::test[a]`` re-runs exactly that test). A process that already has ``LOCAL_RANK``
never launches: it is one of the children. The children live as long as the script: a second
``fit`` in the same script finds them at the same rendezvous.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ddpkit.errors import ChildFailedError, LaunchError
from ddpkit.launchers.base import Launcher
from ddpkit.launchers.env import rank_env
from ddpkit.launchers.watch import (
    POLL_SECONDS,
    PopenHandle,
    end_all,
    first_failure,
    read_error_file,
    write_error_file,
)
from ddpkit.plugins.environments.local import LocalEnvironment
from ddpkit.plugins.training_type.ddp import DDPPlugin
from ddpkit.utilities.ports import bind_free_port

__all__ = ["SubprocessLauncher", "child_command"]

R = TypeVar("R")
_PR_SET_PDEATHSIG = 1


def child_command() -> list[str]:
    """The command line that started this process, re-runnable from any working directory."""
    main = sys.modules.get("__main__")
    if main is None or not getattr(main, "__file__", None) or hasattr(sys, "ps1"):
        raise LaunchError(
            "DDPPlugin re-runs the script for the other ranks, but this session has no script "
            "to re-run (an interactive shell, a notebook or `python -c`). "
            "Fix: pass strategy='ddp_spawn' (spawned ranks), or run the code from a script."
        )
    argv = list(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    tail = len(sys.argv) - 1
    head, args = argv[: len(argv) - tail], argv[len(argv) - tail :]
    head[0] = sys.executable
    if getattr(main, "__spec__", None) is None:
        # `python [opts] script.py`: the script path is the last word of the head.
        head[-1] = os.path.abspath(head[-1])
    return head + args


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """Runs in the child between fork and exec: end the child when the parent dies."""

    def hook() -> None:
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:  # not Linux: the liveness check in the child still applies
            return
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return hook


class SubprocessLauncher(Launcher):
    name = "subprocess"

    def __init__(self, plugin: DDPPlugin) -> None:
        self.plugin = plugin
        self._handles: list[PopenHandle] = []
        self._tmpdir: str | None = None
        self._failure: ChildFailedError | None = None
        self._watcher: threading.Thread | None = None
        self._stop_watching = threading.Event()

    @property
    def is_interactive_compatible(self) -> bool:
        return False

    @property
    def environment(self) -> LocalEnvironment:
        env = self.plugin.cluster_environment
        assert isinstance(env, LocalEnvironment)
        return env

    def launch(self, fn: Callable[..., R], *args: Any) -> R:
        env = self.environment
        if env.is_launched_child:
            return self._run_child(fn, *args)
        if not self._handles:
            self._start_children()
        try:
            return fn(*args)
        except BaseException as exc:
            failure = self._failure or self._child_root_cause()
            self._end_children()
            if failure is not None:
                raise failure from exc
            raise

    def _run_child(self, fn: Callable[..., R], *args: Any) -> R:
        try:
            return fn(*args)
        except BaseException:
            path = self.environment.env.get("DDPKIT_ERROR_FILE")
            if path:
                write_error_file(path, traceback.format_exc())
            raise

    def _start_children(self) -> None:
        env = self.environment
        command = child_command()
        if not env.has_main_port():
            # Rank 0 keeps this socket and hands it to the store: no race for the port, and on
            # one machine nothing listens beyond loopback.
            host = "127.0.0.1" if self.plugin.all_ranks_local else ""
            sock = bind_free_port(host)
            env.assign_port(sock.getsockname()[1])
            self.plugin.store_socket = sock
        self._tmpdir = tempfile.mkdtemp(prefix="ddpkit-")  # mode 0700
        base = dict(os.environ)
        for local_rank in range(1, self.plugin.num_processes):
            child_env = rank_env(
                base,
                main_address=env.main_address(),
                main_port=env.main_port(),
                world_size=self.plugin.world_size,
                node_rank=env.node_rank(),
                local_rank=local_rank,
                parent_pid=os.getpid(),
            )
            child_env["DDPKIT_ERROR_FILE"] = self._error_file(local_rank)
            try:
                proc = subprocess.Popen(
                    command, env=child_env, preexec_fn=_die_with_parent(os.getpid())
                )
            except OSError as err:
                self._end_children()
                raise LaunchError(f"could not start local rank {local_rank}: {err}") from err
            self._handles.append(PopenHandle(rank=self._global_rank(local_rank), proc=proc))
        atexit.register(self._join_at_exit)
        self._watcher = threading.Thread(target=self._watch, name="ddpkit-watch", daemon=True)
        self._watcher.start()

    def _global_rank(self, local_rank: int) -> int:
        return self.environment.node_rank() * self.plugin.num_processes + local_rank

    def _error_file(self, local_rank: int) -> str:
        assert self._tmpdir is not None
        return str(Path(self._tmpdir) / f"rank{self._global_rank(local_rank)}.json")

    def _traceback_of(self, rank: int) -> str:
        if self._tmpdir is None:
            return ""
        return read_error_file(Path(self._tmpdir) / f"rank{rank}.json")

    def _watch(self) -> None:
        """Background: the first child that fails ends the others and interrupts rank 0."""
        import _thread

        while not self._stop_watching.wait(POLL_SECONDS):
            root = first_failure(self._handles)
            if root is None:
                if all(h.poll() == 0 for h in self._handles):
                    return
                continue
            self._failure = ChildFailedError(
                end_all(self._handles, root, self._traceback_of), what="DDP (subprocess launcher)"
            )
            _thread.interrupt_main()
            return

    def _child_root_cause(self) -> ChildFailedError | None:
        # Rank 0 often fails *because* a child died (its collective lost the peer); give the
        # watcher a moment to see that death so the report blames the right rank.
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            if self._failure is not None:
                return self._failure
            root = first_failure(self._handles)
            if root is not None:
                self._stop_watching.set()
                return ChildFailedError(
                    end_all(self._handles, root, self._traceback_of),
                    what="DDP (subprocess launcher)",
                )
            time.sleep(POLL_SECONDS)
        return None

    def _end_children(self) -> None:
        self._stop_watching.set()
        if self._handles:
            end_all(self._handles, None, self._traceback_of)
        self._cleanup()

    def _join_at_exit(self) -> None:
        """The script is over on rank 0: wait for the children to finish theirs."""
        while any(h.poll() is None for h in self._handles):
            if self._failure is not None:
                break
            time.sleep(POLL_SECONDS)
        self._stop_watching.set()
        failed = first_failure(self._handles)
        if failed is not None and self._failure is None:
            report = ChildFailedError(
                end_all(self._handles, failed, self._traceback_of), what="DDP (subprocess launcher)"
            )
            print(f"ddpkit: {report}", file=sys.stderr)
        self._cleanup()

    def _cleanup(self) -> None:
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
