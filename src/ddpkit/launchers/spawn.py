"""Start every rank of this node with ``torch.multiprocessing`` spawn; the user's process waits.

Each rank is a fresh interpreter that imports the user's main module as ``__mp_main__`` (so code
under ``if __name__ == "__main__":`` does not run again) and unpickles the trainer, the module and
the data loaders. Rank zero's return value comes back through a file in a private temporary
directory that is removed on every exit path (after a SIGKILL of the launcher, by the next launch:
see :mod:`ddpkit.launchers.scratch`).
"""

from __future__ import annotations

import ast
import io
import os
import pickle
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from ddpkit.errors import ChildFailedError, LaunchError
from ddpkit.launchers.base import Launcher
from ddpkit.launchers.env import rank_env
from ddpkit.launchers.lifeline import die_with_parent, watch_parent
from ddpkit.launchers.scratch import make_private_dir, open_private, sweep_stale_dirs
from ddpkit.launchers.signals import SignalFlag, exit_exception
from ddpkit.launchers.watch import (
    ENV_ERROR_FILE,
    POLL_SECONDS,
    ErrorRecord,
    ProcessHandle,
    choose_root,
    end_all,
    first_failure,
    read_error_file,
    report_interrupt,
    report_rank_failure,
)
from ddpkit.plugins.environments.local import LocalEnvironment
from ddpkit.plugins.training_type.ddp_spawn import DDPSpawnPlugin
from ddpkit.utilities.ports import listen_for_store

__all__ = ["SpawnLauncher", "check_main_guard"]

R = TypeVar("R")
_WHAT = "DDP (spawn launcher)"


def check_main_guard() -> None:
    """Raise before spawning when the launching call runs at the top level of the main script
    without ``if __name__ == "__main__":`` (every spawned rank would launch again)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or getattr(main, "__spec__", None) is not None:
        return  # no script (REPL, notebook) or `python -m`: nothing to check
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__":
            break
        frame = frame.f_back
    if frame is None:
        return
    line = frame.f_lineno
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_main_test(node.test):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end:
                return
    raise LaunchError(
        f"ddp_spawn: {path}, line {line}, starts training at the top level of the script. "
        f"Every spawned rank imports this script again and would start training again. "
        f'Fix: put the call under `if __name__ == "__main__":`.'
    )


def _is_main_test(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _spawned_rank(payload_file: str, env: dict[str, str], result_file: str, sock: Any) -> None:
    """The body of each spawned rank."""
    parent = int(env["DDPKIT_PARENT_PID"])
    # Its own process group: the terminal's Ctrl-C reaches the launcher only, which forwards it;
    # ending the group also ends the rank's own children (data-loader workers).
    os.setpgid(0, 0)
    die_with_parent(parent)
    watch_parent(parent)
    os.environ.update(env)
    try:
        plugin, fn, args = pickle.loads(Path(payload_file).read_bytes())
        environment = plugin.cluster_environment
        if isinstance(environment, LocalEnvironment):
            environment.adopt(env)
        if sock is not None:
            plugin.store_socket = sock
        result = fn(*args)
        if plugin.global_rank == 0:
            import torch

            with open_private(result_file) as fh:
                torch.save(result, fh)
    except BaseException as exc:
        report_rank_failure(env[ENV_ERROR_FILE], exc)
        raise


class _ResourceTracker:
    """multiprocessing's resource tracker, a helper process that spawn starts on first use and
    that otherwise lingers until the launching process exits (and a moment after). Started by
    this launch, it is stopped with it: no process of the job outlives ``launch``."""

    def __init__(self) -> None:
        from multiprocessing import resource_tracker

        tracker: Any = resource_tracker._resource_tracker  # private: stopped only if we started it
        self._tracker = tracker
        self._was_running = tracker._fd is not None

    def stop_if_started(self) -> None:
        if not self._was_running:
            self._tracker._stop()


class SpawnLauncher(Launcher):
    """The parent only supervises: every rank is spawned, rank zero's result comes back through
    a file in a private temporary directory (removed on every exit path). SIGINT/SIGTERM to the
    parent: the handler sets a flag, the loop ends every rank (SIGTERM, SIGKILL after 3 s) and
    raises ``KeyboardInterrupt`` / ``SystemExit(143)``."""

    name = "spawn"
    returns_to_parent = True

    def __init__(self, plugin: DDPSpawnPlugin) -> None:
        self.plugin = plugin

    def launch(self, fn: Callable[..., R], *args: Any) -> R:
        check_main_guard()
        payload = self._pickle(fn, args)
        import torch
        import torch.multiprocessing as mp

        env = self.plugin.cluster_environment
        assert isinstance(env, LocalEnvironment)
        node_rank = env.node_rank()
        # A launcher that was SIGKILLed could not remove its directory: the next launch does.
        sweep_stale_dirs()
        # Made first: from here on, the finally below removes it and closes the socket, whatever
        # fails (a busy MASTER_PORT, a full disk while writing the payload).
        tmpdir = str(make_private_dir())  # mode 0700, files 0600
        # A file, not a Process argument: spawn writes the arguments into a pipe that the child
        # drains only after importing the main module (torch: seconds), so a payload larger than
        # the pipe (the data set) would hold this loop there and start the ranks one by one.
        payload_file = Path(tmpdir) / "payload.pkl"
        sock = None
        handles: list[ProcessHandle] = []
        signals = SignalFlag()
        tracker = _ResourceTracker()

        def record_of(rank: int) -> ErrorRecord | None:
            return read_error_file(Path(tmpdir) / f"rank{rank}.json")

        try:
            with open_private(payload_file) as fh:
                fh.write(payload)
            if node_rank == 0:
                # Bound here, before any rank starts, and handed open to rank 0's store: no
                # window for another process to take the port, and a busy MASTER_PORT fails
                # before a rank exists. Loopback only when every rank is on this machine.
                port = env.main_port() if env.has_main_port() else None
                sock = listen_for_store(port, local_only=self.plugin.all_ranks_local)
                env.assign_port(sock.getsockname()[1])
            with signals:
                ctx: Any = mp.get_context(self.plugin.start_method)
                for local_rank in range(self.plugin.num_processes):
                    rank = node_rank * self.plugin.num_processes + local_rank
                    child_env = rank_env(
                        {},
                        main_address=env.main_address(),
                        main_port=env.main_port(),
                        world_size=self.plugin.world_size,
                        node_rank=node_rank,
                        local_rank=local_rank,
                        parent_pid=os.getpid(),
                    )
                    child_env[ENV_ERROR_FILE] = str(Path(tmpdir) / f"rank{rank}.json")
                    proc = ctx.Process(
                        target=_spawned_rank,
                        args=(
                            str(payload_file),
                            child_env,
                            str(Path(tmpdir) / "result.pt"),
                            sock if rank == 0 else None,
                        ),
                        name=f"ddpkit-rank{rank}",
                    )
                    proc.start()
                    handles.append(ProcessHandle(rank=rank, proc=proc))
                if sock is not None:
                    sock.close()  # rank 0 inherited its own descriptor at start
                    sock = None
                self._supervise(handles, signals, record_of)
            result_file = Path(tmpdir) / "result.pt"
            if not result_file.exists():
                return None  # type: ignore[return-value]  # rank 0 ran on another node
            result: R = torch.load(result_file, weights_only=False)
            return result
        finally:
            # Whatever ended the launch (an error in this loop, a KeyboardInterrupt outside
            # the handlers), no rank outlives it and nothing is left on disk.
            if any(h.poll() is None for h in handles):
                end_all(handles, None, record_of, reason="after the launcher ended")
            for h in handles:
                h.proc.join(timeout=0)
            if sock is not None:
                sock.close()
            signals.close()
            tracker.stop_if_started()
            shutil.rmtree(tmpdir, ignore_errors=True)

    def _supervise(
        self,
        handles: list[ProcessHandle],
        signals: SignalFlag,
        record_of: Callable[[int], ErrorRecord | None],
    ) -> None:
        """Poll until every rank finished; raise on the first failure or signal."""
        while True:
            signum = signals.wait(POLL_SECONDS)
            if signum is not None:
                name = signal.Signals(signum).name
                fates = end_all(
                    handles, None, record_of, reason=f"after the launcher received {name}"
                )
                report_interrupt(signum, _WHAT, fates)
                raise exit_exception(signum)
            failed = first_failure(handles, record_of)
            if failed is not None:
                root = choose_root(handles, failed, record_of) or failed
                fates = end_all(handles, root, record_of, reason=f"after rank {root.rank} failed")
                raise ChildFailedError(fates, what=_WHAT)
            if all(h.poll() == 0 for h in handles):
                return

    def _pickle(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> bytes:
        buffer = io.BytesIO()
        try:
            pickle.dump((self.plugin, fn, args), buffer)
        except Exception as err:
            raise LaunchError(
                f"ddp_spawn pickles the module, the data loaders and the trainer into every "
                f"rank, and pickling failed: {type(err).__name__}: {err}. Fix: make them "
                f"picklable (define classes and functions at module level, no lambdas or open "
                f"files), or use strategy='ddp', which re-runs the script instead."
            ) from err
        return buffer.getvalue()
