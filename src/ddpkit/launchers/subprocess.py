"""Start the other ranks of this node as subprocesses that re-run the user's command line.

The user's process is local rank 0. For a script started as ``python -u train.py --lr 0.1`` on
node 0 of one, with two devices, rank 1 is started as::

    <sys.executable> -u /abs/path/train.py --lr 0.1

with the parent's environment plus::

    MASTER_ADDR=127.0.0.1  MASTER_PORT=<free port, bound by rank 0>  WORLD_SIZE=2
    NODE_RANK=0  LOCAL_RANK=1  DDPKIT_PARENT_PID=<pid of rank 0>
    DDPKIT_ERROR_FILE=<private 0700 dir>/rank1.json  DDPKIT_STAGE_FILE=<same dir>/rank1.stages

The directory is the launch's scratch directory (:mod:`ddpkit.launchers.scratch`): 0700, its
files 0600.

``python -m module args`` is re-run as ``python -m module args`` (so ``python -m pytest
tests/x.py::test[a]`` re-runs exactly that test). A process that already has ``LOCAL_RANK``
never launches: it is one of the children. The children live as long as the script: a second
``fit`` (or a second Trainer) in the same script finds them at the same rendezvous.

Supervision, all-or-nothing (see :mod:`ddpkit.launchers.watch`): each child leads its own process
group, has stdin on /dev/null and ends with rank 0 (parent-death signal, and a thread that watches
its parent). A supervisor thread in rank 0 polls the children:

- a child fails: the others are ended, and rank 0's main thread is interrupted (its collective
  also fails as soon as the child's sockets close); ``fit`` raises :class:`ChildFailedError`,
  root cause first;
- rank 0 itself raises: the children are ended and rank 0's own exception propagates, with a
  note saying how each child ended;
- SIGINT / SIGTERM to rank 0: the handler only sets a flag; the supervisor ends the children
  (SIGTERM, SIGKILL after 3 s) and ``fit`` raises ``KeyboardInterrupt`` / ``SystemExit(143)``;
- a stall: every rank's stack is dumped and the rank that never arrived is the root cause (see
  :mod:`ddpkit.launchers.stall`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from ddpkit.errors import ChildFailedError, LaunchError, RankFailure
from ddpkit.launchers.base import Launcher
from ddpkit.launchers.env import rank_env
from ddpkit.launchers.lifeline import preexec_for_rank, watch_parent
from ddpkit.launchers.scratch import make_private_dir, sweep_stale_dirs, write_private
from ddpkit.launchers.signals import SignalFlag, exit_exception
from ddpkit.launchers.stall import StallReport
from ddpkit.launchers.watch import (
    ENV_ERROR_FILE,
    GRACE_SECONDS,
    POLL_SECONDS,
    STALL_GATHER_SECONDS,
    ErrorRecord,
    PopenHandle,
    RankHandle,
    choose_root,
    end_all,
    first_failure,
    is_peer_loss,
    read_error_file,
    report_interrupt,
    report_rank_failure,
)
from ddpkit.plugins.environments.local import LocalEnvironment
from ddpkit.plugins.training_type.ddp import DDPPlugin
from ddpkit.utilities.ports import listen_for_store

__all__ = ["SubprocessLauncher", "child_command"]

R = TypeVar("R")
_WHAT = "DDP (subprocess launcher)"
#: when rank 0's collective fails, how long a child has to show that it died first
PEER_LOSS_SECONDS = 3.0


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


class _RankZeroAbort(BaseException):
    """Raised in rank zero's main thread by the supervisor thread once the job has failed or was
    interrupted; ``launch`` replaces it with the real error. A BaseException, so that user code's
    ``except Exception`` does not swallow it."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = [ctypes.c_ulong, ctypes.py_object]
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)


def _is_peer_loss(exc: BaseException) -> bool:
    return isinstance(exc, _RankZeroAbort) or is_peer_loss(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


class _Job:
    """The children of this process and their supervision; one per script (module global).

    Whoever first sees the end of the job (the supervisor thread: a child failed or a signal came;
    rank 0's main thread: its own stage failed) *claims* it, ends every child, records the
    outcome and *settles*; everyone else waits for that and uses the recorded outcome.
    """

    def __init__(self, plugin: DDPPlugin, env: LocalEnvironment) -> None:
        self.num_processes = plugin.num_processes
        self.world_size = plugin.world_size
        self.node_rank = env.node_rank()
        self.rank = self.node_rank * self.num_processes
        self.handles: list[PopenHandle] = []
        self.sock: socket.socket | None = None
        self.store_server: Any = None  # made by rank 0's plugin on ``sock`` in the first stage
        self.tmpdir: str | None = None
        self.signals = SignalFlag()
        self.lock = threading.Lock()
        # The outcome, written by the claimer before it settles.
        self.failure: ChildFailedError | None = None
        self.failure_reported = False
        self.interrupted: int | None = None
        self.rank0_stall: StallReport | None = None
        self._rank0_stall_at: float | None = None
        self.stage = ""
        self.script_raised: str | None = None
        self.exiting = False
        self.stages = 0  # the stages rank 0 has started
        self._claimed = False
        self._settled = threading.Event()
        self._armed_tid: int | None = None
        self._abort_pending = False
        self._watcher: threading.Thread | None = None
        try:
            self._start(plugin, env)
        except BaseException:
            self._abandon()
            raise

    # -- start ----------------------------------------------------------------------------------

    def _start(self, plugin: DDPPlugin, env: LocalEnvironment) -> None:
        command = child_command()
        if self.node_rank == 0:
            # Rank 0 binds the store's socket before any child starts and hands it, open, to the
            # store: the port is never free in between, a busy MASTER_PORT fails here (before
            # there is a child to orphan), and on one machine nothing listens beyond loopback.
            port = env.main_port() if env.has_main_port() else None
            self.sock = listen_for_store(port, local_only=plugin.all_ranks_local)
            env.assign_port(self.sock.getsockname()[1])
        self.port = env.main_port()
        self.address = env.main_address()
        # A launcher that was SIGKILLed could not remove its directory: the next launch does.
        sweep_stale_dirs()
        self.tmpdir = str(make_private_dir())  # mode 0700, files 0600
        base = dict(os.environ)
        try:
            for local_rank in range(1, self.num_processes):
                rank = self.rank + local_rank
                child_env = rank_env(
                    base,
                    main_address=self.address,
                    main_port=self.port,
                    world_size=self.world_size,
                    node_rank=self.node_rank,
                    local_rank=local_rank,
                    parent_pid=os.getpid(),
                )
                child_env[ENV_ERROR_FILE] = self.error_file(rank)
                child_env[ENV_STAGE_FILE] = self.stage_file(rank)
                try:
                    proc = subprocess.Popen(
                        command,
                        env=child_env,
                        stdin=subprocess.DEVNULL,
                        preexec_fn=preexec_for_rank(os.getpid()),
                    )
                except OSError as err:
                    raise LaunchError(
                        f"could not start local rank {local_rank} ({' '.join(command)}): {err}"
                    ) from err
                self.handles.append(PopenHandle(rank=rank, proc=proc))
        except BaseException:
            end_all(self.handles, None, self.record_of, reason="after rank 0 could not start all")
            self.close()
            raise
        previous_hook = sys.excepthook

        def excepthook(
            kind: type[BaseException], value: BaseException, tb: TracebackType | None
        ) -> None:
            self.script_raised = kind.__name__
            previous_hook(kind, value, tb)

        sys.excepthook = excepthook
        atexit.register(self.at_exit)
        self._watcher = threading.Thread(target=self._supervise, name="ddpkit-watch", daemon=True)
        self._watcher.start()

    def _abandon(self) -> None:
        """The start failed half-way: close what it opened."""
        self.signals.close()
        if self.sock is not None:
            self.sock.close()

    def error_file(self, rank: int) -> str:
        assert self.tmpdir is not None
        return str(Path(self.tmpdir) / f"rank{rank}.json")

    def stage_file(self, rank: int) -> str:
        assert self.tmpdir is not None
        return str(Path(self.tmpdir) / f"rank{rank}.stages")

    def _stages_of(self, rank: int) -> int:
        """How many stages a child has started (it says so in its stage file)."""
        if self.tmpdir is None:
            return 0
        try:
            return int(Path(self.stage_file(rank)).read_text() or 0)
        except (OSError, ValueError):
            return 0

    def record_of(self, rank: int) -> ErrorRecord | None:
        if self.tmpdir is None:
            return None
        return read_error_file(self.error_file(rank))

    # -- claim and settle -------------------------------------------------------------------------

    def _claim(self) -> bool:
        with self.lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def _end(self, reason: str, root: RankHandle | None = None) -> list[RankFailure]:
        """The claimer ends every child still running; each child's fate, root first."""
        return end_all(self.handles, root, self.record_of, reason=reason)

    # -- rank 0's main thread -------------------------------------------------------------------

    def run(self, stage: str, fn: Callable[..., R], args: tuple[Any, ...]) -> R:
        self._check_before(stage)
        self.stage = stage
        self.stages += 1
        with self.signals:
            try:
                try:
                    self._arm()
                    result = fn(*args)
                finally:
                    self._disarm()
            except BaseException as exc:
                self._disarm()  # again: the abort may have landed inside the first call
                outcome = self._outcome(exc)
                if outcome is exc:
                    raise
                # The report (or the interrupt) says it all; the lost-peer error is noise.
                raise outcome from None
            if self.signals.signum is not None or self._claimed:
                # Something happened just as the stage ended: it still ends the job.
                raise self._outcome(None) from None
        return result

    def _check_before(self, stage: str) -> None:
        if self.failure is not None:
            self.failure_reported = True
            raise self.failure
        for h in self.handles:
            code = h.poll()
            if code is None:
                continue
            if self._claim():
                self._end(f"after rank {h.rank} exited before {stage}")
                self._settled.set()
            raise LaunchError(
                f"Trainer.{stage}: rank {h.rank} (pid {h.pid}) has already exited (exit code "
                f"{code}), so it will never join this {stage}. Every rank must make the same "
                f"Trainer calls: a call under `if trainer.is_global_zero:` runs on rank 0 "
                f"only. Fix: make the call on every rank."
            )
        if self._claimed:
            raise LaunchError(
                f"Trainer.{stage}: the other ranks of this script have already ended; a script "
                f"runs its ranks once. Fix: start the script again."
            )

    def _arm(self) -> None:
        with self.lock:
            self._armed_tid = threading.get_ident()

    def _disarm(self) -> None:
        with self.lock:
            tid, self._armed_tid = self._armed_tid, None
            if self._abort_pending and tid is not None:
                _clear_async_exc(tid, None)
            self._abort_pending = False

    @property
    def armed(self) -> bool:
        return self._armed_tid is not None

    def _outcome(self, exc: BaseException | None) -> BaseException:
        """What rank 0 raises once its stage ended with ``exc`` (None: it returned)."""
        signum = self.signals.signum
        if signum is not None and self._claim():
            self._interrupt(signum)
        if exc is not None and not self._claimed:
            self._wait_for_root_cause(exc)
        if exc is not None and self._claim():
            # Nobody else saw a failure: rank 0 is the root cause. End the children, say how
            # each ended, keep rank 0's own exception and traceback.
            fates = self._end(f"after rank {self.rank} failed ({_first_line(exc)})")
            self._settled.set()
            for fate in fates:
                exc.add_note(f"ddpkit: {fate.line()}")
            return exc
        self._settled.wait()
        if self.interrupted is not None:
            return exit_exception(self.interrupted)
        assert self.failure is not None
        self.failure_reported = True
        return self._with_rank0_line(self.failure, exc)

    def _wait_for_root_cause(self, exc: BaseException) -> None:
        """Rank 0 often fails *because* a child died (its collective lost the peer): give the
        supervisor a moment to see that death, so the report blames the right rank."""
        deadline = time.monotonic() + (PEER_LOSS_SECONDS if _is_peer_loss(exc) else 0.0)
        while not self._claimed:
            failed = first_failure(self.handles, self.record_of)
            exited = [h for h in self.handles if h.poll() is not None]
            culprit = failed or (exited[0] if exited else None)
            if culprit is not None and self._claim():
                self._fail_with(culprit)
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(POLL_SECONDS)

    def _with_rank0_line(
        self, failure: ChildFailedError, exc: BaseException | None
    ) -> BaseException:
        if any(f.rank == self.rank for f in failure.failures):
            return failure
        root = failure.root_cause
        if exc is None or isinstance(exc, _RankZeroAbort):
            how = f"this process; interrupted by ddpkit after rank {root.rank} failed"
        elif _is_peer_loss(exc):
            how = f"this process; its collective failed when rank {root.rank} went away"
        else:
            how = f"this process; then failed: {_first_line(exc)}"
        line = RankFailure(rank=self.rank, pid=os.getpid(), exitcode=None, note=how)
        return ChildFailedError([root, line, *failure.failures[1:]], what=failure.what)

    # -- the supervisor thread ------------------------------------------------------------------

    def _supervise(self) -> None:
        early_exit_since: float | None = None
        while not self._claimed:
            signum = self.signals.wait(POLL_SECONDS)
            if signum is not None and self.signals.installed:
                if self._claim():
                    self._interrupt(signum)
                    self._interrupt_main()
                return
            failed = first_failure(self.handles, self.record_of)
            if failed is not None:
                if self._claim():
                    self._fail_with(failed)
                    self._interrupt_main()
                return
            silent = self._silent_after_stall()
            if silent is not None:
                if self._claim():
                    self._fail_with(silent)
                    self._interrupt_main()
                return
            exited = [h for h in self.handles if h.poll() is not None]
            if exited and len(exited) == len(self.handles) and not self.armed:
                return  # every child finished its script
            if exited and self.armed and self.rank0_stall is None:
                # A child that finished its script while rank 0 is in a stage never joins it:
                # at once if it never started this stage, after the grace period if it did (the
                # very end of a stage may race with a fast child's exit).
                early_exit_since = early_exit_since or time.monotonic()
                never_started = self._stages_of(exited[0].rank) < self.stages
                waited = time.monotonic() - early_exit_since > GRACE_SECONDS
                if (never_started or waited) and self._claim():
                    self._fail_with(exited[0])
                    self._interrupt_main()
                    return
            else:
                early_exit_since = None
            ahead = [h for h in self.handles if self._stages_of(h.rank) > self.stages]
            if self.exiting and ahead:
                if self._claim():
                    self._stage_without_rank0(ahead[0])
                return

    def _fail_with(self, first: RankHandle) -> None:
        """The claimer: choose the root cause, end the others, record the failure, settle."""
        root = choose_root(
            self.handles,
            first,
            self.record_of,
            others_never_arrived=lambda: (
                self.rank0_stall is not None and self.rank0_stall.never_arrived
            ),
        )
        stalled0 = self.rank0_stall
        if root is None:  # rank 0 is the one that never arrived
            assert stalled0 is not None
            fates = self._end(f"after rank {self.rank} stalled")
            own = RankFailure(
                rank=self.rank,
                pid=os.getpid(),
                exitcode=None,
                traceback=stalled0.stack,
                note=f"this process; {stalled0.note}",
            )
            self.failure = ChildFailedError([own, *fates], what=_WHAT)
            self._settled.set()
            return
        reason = f"after rank {root.rank} failed" if stalled0 is None else "after the stall alarm"
        fates = self._end(reason, root=root)
        if root.poll() == 0:
            fates[0] = RankFailure(
                rank=root.rank,
                pid=root.pid,
                exitcode=0,
                note=(
                    f"exited with code 0 while rank {self.rank} was still in "
                    f"{self.stage or 'a stage'}: every rank must make the same Trainer calls (a "
                    f"call under `if trainer.is_global_zero:` runs on rank 0 only)"
                ),
            )
        if stalled0 is not None:
            own = RankFailure(
                rank=self.rank,
                pid=os.getpid(),
                exitcode=None,
                note=f"this process; {stalled0.note}",
            )
            fates.insert(1, own)
        self.failure = ChildFailedError(fates, what=_WHAT)
        self._settled.set()

    def _interrupt(self, signum: int) -> None:
        """The claimer, after SIGINT/SIGTERM: end the children, say so, settle."""
        self.interrupted = signum
        fates = self._end(f"after rank {self.rank} received {signal.Signals(signum).name}")
        report_interrupt(signum, _WHAT, fates)
        self._settled.set()

    def _interrupt_main(self) -> None:
        """Unwind rank 0's main thread if it is in a stage; if it cannot be unwound (a C call
        that never returns), report and exit after the grace period."""
        with self.lock:
            if self._armed_tid is None:
                return
            _set_async_exc(self._armed_tid, _RankZeroAbort)
            self._abort_pending = True
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline:
            if not self.armed:
                return
            time.sleep(POLL_SECONDS)
        if self.failure is not None:
            sys.stderr.write(f"ddpkit: {self.failure}\n")
        sys.stderr.write(
            f"ddpkit: rank {self.rank}'s main thread did not return within {GRACE_SECONDS:g} s "
            f"(it is inside a call that cannot be interrupted); ending this process.\n"
        )
        sys.stderr.flush()
        self.close()
        os._exit(128 + self.interrupted if self.interrupted is not None else 1)

    def _silent_after_stall(self) -> PopenHandle | None:
        """A child that has not answered the stall alarm long after rank 0 did: it never
        arrived, and is stuck where even its watchdog thread cannot run."""
        if self._rank0_stall_at is None:
            return None
        if time.monotonic() - self._rank0_stall_at < STALL_GATHER_SECONDS:
            return None
        return next((h for h in self.handles if h.poll() is None), None)

    def on_rank0_stall(self, report: StallReport) -> None:
        """Rank 0's stall handler (in its watchdog thread): record the report. The children
        answer the same alarm and exit; the supervisor sees that and makes the report, with a
        rank that never arrived (possibly rank 0) as the root cause."""
        self.rank0_stall = report
        self._rank0_stall_at = time.monotonic()

    def _stage_without_rank0(self, ahead: PopenHandle) -> None:
        n = self._stages_of(ahead.rank)
        fates = self._end(f"after rank {ahead.rank} started a stage rank 0 never called", ahead)
        fates[0] = RankFailure(
            rank=ahead.rank,
            pid=ahead.pid,
            exitcode=fates[0].exitcode,
            note=(
                f"started its stage #{n} after rank {self.rank}'s script had ended with "
                f"{self.stages}: every rank must make the same Trainer calls (a call under "
                f"`if not trainer.is_global_zero:` runs on the other ranks only)"
            ),
        )
        own = RankFailure(
            rank=self.rank, pid=os.getpid(), exitcode=None, note="this process; its script ended"
        )
        self.failure = ChildFailedError([fates[0], own, *fates[1:]], what=_WHAT)
        self._settled.set()

    # -- exit -------------------------------------------------------------------------------------

    def at_exit(self) -> None:
        """The script is over on rank 0: wait for the children to finish theirs (or end them at
        once when rank 0's script failed), report a failure not yet reported, clean up."""
        self.exiting = True
        if self.script_raised is not None and self._claim():
            fates = self._end(f"after rank {self.rank}'s script raised {self.script_raised}")
            sys.stderr.write("".join(f"ddpkit: {fate.line()}\n" for fate in fates))
            self._settled.set()
        with self.signals:
            while self._watcher is not None and self._watcher.is_alive():
                self._watcher.join(timeout=POLL_SECONDS * 4)
            if self._claimed:
                self._settled.wait()
        self.close()
        self.signals.close()
        if self.failure is not None and not self.failure_reported:
            # A child failed after rank 0's last stage: the script failed, but atexit cannot
            # change the exit status. (An interrupt already set it: KeyboardInterrupt or
            # SystemExit(143) propagated through the script.)
            sys.stderr.write(f"ddpkit: {self.failure}\n")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)

    def close(self) -> None:
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


_job: _Job | None = None
#: in a child: the stages this process has started
_child_stages = 0
#: tells a child where to count the stages it starts
ENV_STAGE_FILE = "DDPKIT_STAGE_FILE"


class SubprocessLauncher(Launcher):
    name = "subprocess"

    def __init__(self, plugin: DDPPlugin) -> None:
        self.plugin = plugin

    @property
    def environment(self) -> LocalEnvironment:
        env = self.plugin.cluster_environment
        assert isinstance(env, LocalEnvironment)
        return env

    def launch(self, fn: Callable[..., R], *args: Any) -> R:
        env = self.environment
        if env.is_launched_child:
            return self._run_child(fn, *args)
        job = self._job()
        # One store server per script, whatever Trainer runs the stage.
        self.plugin.store_socket = job.sock
        self.plugin.store_server = job.store_server
        self.plugin.stall_handler = job.on_rank0_stall
        stage = str(args[0]) if args else "fit"
        try:
            return job.run(stage, fn, args)
        finally:
            job.store_server = self.plugin.store_server

    def _job(self) -> _Job:
        global _job
        env = self.environment
        if _job is None:
            _job = _Job(self.plugin, env)
            return _job
        if (_job.num_processes, _job.world_size) != (
            self.plugin.num_processes,
            self.plugin.world_size,
        ):
            raise LaunchError(
                f"this script already runs {_job.world_size} ranks ({_job.num_processes} per "
                f"node), and a second Trainer asks for {self.plugin.world_size} "
                f"({self.plugin.num_processes} per node): the other ranks re-run the script, so "
                f"every Trainer of a script must use the same devices and num_nodes."
            )
        if not env.has_main_port():
            env.assign_port(_job.port)
        return _job

    def _run_child(self, fn: Callable[..., R], *args: Any) -> R:
        global _child_stages
        env = self.environment.env
        if "DDPKIT_PARENT_PID" in env:
            watch_parent(int(env["DDPKIT_PARENT_PID"]))
        _child_stages += 1
        path = env.get(ENV_STAGE_FILE)
        if path:
            # Rank 0 reads it once its own script has ended: a stage it never started is one
            # this rank would wait in until the timeout.
            with contextlib.suppress(OSError):
                write_private(path, str(_child_stages).encode())
        try:
            return fn(*args)
        except BaseException as exc:
            report_rank_failure(env.get(ENV_ERROR_FILE), exc)
            raise
