"""Start every rank of this node with ``torch.multiprocessing`` spawn; the user's process waits.

Each rank is a fresh interpreter that imports the user's main module as ``__mp_main__`` (so code
under ``if __name__ == "__main__":`` does not run again) and unpickles the trainer, the module and
the data loaders. Rank zero's return value comes back through a file in a private temporary
directory that is removed on every exit path (after a SIGKILL of the launcher, by the next launch:
see :mod:`ddpkit._runtime.ranks._scratch`). Every launch binds a port of its own: a stage never
reuses the previous stage's port, which another process may hold by then.
"""

from __future__ import annotations

import ast
import faulthandler
import functools
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from ddpkit._runtime.launch._base import Launcher
from ddpkit._runtime.launch._env import bind_rendezvous, launchable_environment, rank_env
from ddpkit._runtime.launch._fork import (
    as_if_unpickled,
    check_fork_safe,
    in_forked_rank,
    refuse_main_references,
)
from ddpkit._runtime.process.context import ProcessContext
from ddpkit._runtime.process.files import JobFiles
from ddpkit._runtime.process.proc import MpProcess, Proc
from ddpkit._runtime.process.signals import SignalFlag
from ddpkit._runtime.ranks._clean_exit import end_after_exit_handlers
from ddpkit._runtime.ranks._errorfile import report_rank_failure
from ddpkit._runtime.ranks._lifeline import preexec_for_rank, watch_parent
from ddpkit._runtime.ranks._names import (
    ENV_ERROR_FILE,
    ENV_FAULTHANDLER,
    ENV_JOB_KEY,
    ENV_PARENT_PID,
)
from ddpkit._runtime.ranks._rendezvous import Rendezvous, StoreHost
from ddpkit._runtime.ranks._scratch import write_private
from ddpkit._runtime.restart.attempt import Attempt
from ddpkit._runtime.restart.attempts import run_attempts
from ddpkit._tracebacks import install_folding_hook
from ddpkit.errors import LaunchError
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.training_type.ddp_spawn import DDPSpawnPlugin
from ddpkit.utilities import _rng as rng

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
    while frame is not None and not (
        frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__"
    ):
        frame = frame.f_back
    if frame is None:
        return
    line = frame.f_lineno
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError):
        return
    if any(
        isinstance(node, ast.If)
        and _is_main_test(node.test)
        and node.lineno <= line <= (node.end_lineno or node.lineno)
        for node in ast.walk(tree)
    ):
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


def _spawned_rank(
    payload: str | tuple[Any, ...],
    env: dict[str, str],
    result_file: str,
    sock: Any,
    served: bool = False,
) -> None:
    """The body of each spawned rank (``served``: forked by the forkserver). ``payload``: the
    file of the pickled payload, or (a forked rank) the payload itself, inherited."""
    if not isinstance(payload, str):
        in_forked_rank()
    # A forkserver's rank is the server's child; the server ends when the launcher does.
    parent = os.getppid() if served else int(env[ENV_PARENT_PID])
    # Its own process group and death with the parent, as a rank started by Popen gets them.
    preexec_for_rank(parent)()
    watch_parent(parent)
    # Before unpickling: the environment objects of the payload read this rank's variables
    # (and the rank's side of each stage watches the same parent).
    os.environ.update({**env, ENV_PARENT_PID: str(parent)})
    # Spawned from this process's environment, not ``env``: faulthandler is switched on here.
    if env.get(ENV_FAULTHANDLER) and not faulthandler.is_enabled():
        faulthandler.enable(all_threads=True)
    try:
        if isinstance(payload, str):
            plugin, fn, args, parent_rng = pickle.loads(Path(payload).read_bytes())
        else:
            plugin, fn, args, parent_rng = payload
            as_if_unpickled(plugin)
        # Every rank starts from the launching process's generators (as Lightning's spawn
        # launcher does): the same run twice draws the same dropout masks, and so does a
        # restart, which then sets the checkpoint's states before its first epoch.
        rng.restore(rng.decode(parent_rng))
        host = StoreHost(sock) if sock is not None else None
        key = env[ENV_JOB_KEY]
        rendezvous = Rendezvous(env["MASTER_ADDR"], int(env["MASTER_PORT"]), host, key=key)
        with plugin.joining(rendezvous):
            result = fn(*args)
        if plugin.global_rank == 0:
            import torch

            write_private(result_file, lambda fh: torch.save(result, fh))
    except BaseException as exc:
        if report_rank_failure(env[ENV_ERROR_FILE], exc) and not isinstance(exc, SystemExit):
            # The launcher's report shows the traceback once; multiprocessing would print it
            # again here ("Process ddpkit-rank1: Traceback ..."). Same exit status, 1, reached
            # without the interpreter's teardown, which gloo's threads may abort.
            end_after_exit_handlers()
            raise SystemExit(1) from None
        raise


def _started(process: Any) -> MpProcess:
    process.start()
    return MpProcess(process)


def _result(path: Path) -> Any:
    """Rank zero's return value; None when rank zero ran on another node."""
    if not path.exists():
        return None
    import torch

    return torch.load(path, weights_only=False)


def _context(start_method: str) -> Any:
    """The multiprocessing context of ``start_method``. ``forkserver``: a server that imported
    torch, ddpkit and the main module once forks each rank (it lives as long as this process, so
    a later stage's ranks start at once); the preload applies when it is first started."""
    import torch.multiprocessing as mp

    ctx: Any = mp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(["__main__", "torch", "torch.distributed", "ddpkit"])
    return ctx


class SpawnLauncher(Launcher):
    """The parent only supervises: every rank is spawned, rank zero's result comes back through
    a file in a private temporary directory (removed on every exit path). SIGINT/SIGTERM to the
    parent: the handler sets a flag, the loop ends every rank (SIGTERM, SIGKILL after 3 s) and
    raises ``KeyboardInterrupt`` / ``SystemExit(143)``."""

    returns_to_parent = True

    def __init__(self, plugin: DDPSpawnPlugin) -> None:
        self.plugin = plugin

    @property
    def name(self) -> str:  # type: ignore[override]
        """``"fork"`` when the ranks are forked (``ddp_notebook``), ``"spawn"`` otherwise."""
        return "fork" if self.plugin.start_method == "fork" else "spawn"

    def launch(self, fn: Callable[..., R], *args: Any, max_restarts: int = 0) -> R:
        forked = self.plugin.start_method == "fork"
        if forked:
            check_fork_safe("ddp_notebook (fork launcher)")
        else:
            check_main_guard()
        install_folding_hook()  # the report that ends the script: its frames of ddpkit folded
        env = launchable_environment(self.plugin)
        # A forked rank inherits the payload: nothing to pickle, nothing a notebook cell defined
        # to import. A spawned rank unpickles it from a file.
        payload: bytes | tuple[Any, ...] = (
            (self.plugin, fn, args, rng.encode(rng.capture())) if forked else self._pickle(fn, args)
        )
        # The parent does not train: a restart spawns every rank again, from the same payload.
        result: R = run_attempts(lambda a: self._once(env, payload, a), max_restarts)
        return result

    def _once(
        self, env: ClusterEnvironment, payload: bytes | tuple[Any, ...], attempt: Attempt
    ) -> Any:
        """One attempt: its own directory, port, key and ranks, all gone when it returns."""
        # Made first: from here on, the finally below removes it and closes the socket, whatever
        # fails (a busy MASTER_PORT, a full disk while writing the payload).
        files = JobFiles()
        host: StoreHost | None = None
        signals = SignalFlag()
        from multiprocessing import resource_tracker

        # multiprocessing's resource tracker, a helper process that spawn starts on first use and
        # that otherwise lingers until the launching process exits (and a moment after). Started
        # by this launch, it is stopped with it: no process of the job outlives ``launch``.
        tracker: Any = resource_tracker._resource_tracker  # private: stopped only if we started it
        tracker_was_running = tracker._fd is not None
        context = ProcessContext(_WHAT, files.record_of)
        try:
            # A file, not a Process argument: spawn writes the arguments into a pipe that the
            # child drains only after importing the main module (torch: seconds), so a payload
            # larger than the pipe (the data set) would start the ranks one by one.
            if isinstance(payload, bytes):
                write_private(files.path / "payload.pkl", payload)
            rendezvous = bind_rendezvous(self.plugin, env)
            host = rendezvous.host  # handed open to rank 0's store
            with signals:
                extra = {ENV_JOB_KEY: rendezvous.key, **attempt.env()}
                starters = self._starters(files, payload, rendezvous, extra)
                context.start(starters, failed="after the launcher ended")
                if host is not None:
                    host.close()  # rank 0 inherited its own descriptor at start
                    host = None
                error = context.wait(signals)
                if error is not None:
                    raise error
            return _result(files.path / "result.pt")
        finally:
            # Whatever ended the launch (an error in this loop, a KeyboardInterrupt outside
            # the handlers), no rank outlives it and nothing is left on disk.
            if any(r.poll() is None for r in context.ranks):
                context.close("after the launcher ended")
            for r in context.ranks:
                if isinstance(r.proc, MpProcess):
                    r.proc.join(timeout=0)
            if host is not None:
                host.close()
            signals.close()
            if not tracker_was_running:
                tracker._stop()
            files.close()

    def _starters(
        self,
        files: JobFiles,
        payload: bytes | tuple[Any, ...],
        rendezvous: Rendezvous,
        extra: dict[str, str],
    ) -> list[tuple[int, Callable[[], Proc]]]:
        """How each rank of this node starts: a process of the start method's context."""
        mp_context = _context(self.plugin.start_method)
        node_rank, per_node = self.plugin.node_rank, self.plugin.num_processes
        starters: list[tuple[int, Callable[[], Proc]]] = []
        for local_rank in range(per_node):
            rank = node_rank * per_node + local_rank
            child_env = rank_env(
                # A rank's own variables only (it inherits this process's); the user's say on
                # faulthandler is kept, rank_env switches it on otherwise.
                {k: os.environ[k] for k in (ENV_FAULTHANDLER,) if k in os.environ},
                main_address=rendezvous.address,
                main_port=rendezvous.port,
                world_size=self.plugin.world_size,
                node_rank=node_rank,
                local_rank=local_rank,
                parent_pid=os.getpid(),
                extra={ENV_ERROR_FILE: str(files.error_file(rank)), **extra},
            )
            process = mp_context.Process(
                target=_spawned_rank,
                args=(
                    str(files.path / "payload.pkl") if isinstance(payload, bytes) else payload,
                    child_env,
                    str(files.path / "result.pt"),
                    rendezvous.host.sock if (rendezvous.host is not None and rank == 0) else None,
                    self.plugin.start_method == "forkserver",
                ),
                name=f"ddpkit-rank{rank}",
            )
            starters.append((rank, functools.partial(_started, process)))
        return starters

    def _pickle(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> bytes:
        payload = (self.plugin, fn, args, rng.encode(rng.capture()))
        try:
            refuse_main_references(payload)
            return pickle.dumps(payload)
        except LaunchError:
            raise
        except Exception as err:
            raise LaunchError(
                f"ddp_spawn pickles the module, the data loaders and the trainer into every "
                f"rank, and pickling failed: {type(err).__name__}: {err}. Fix: make them "
                f"picklable (define classes and functions at module level, no lambdas or open "
                f"files), or use strategy='ddp', which re-runs the script instead (from a "
                f"notebook: strategy='ddp_notebook', which forks the ranks)."
            ) from err
