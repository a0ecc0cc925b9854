"""Rank zero's side of the subprocess launcher: the other ranks of this script, supervised.

One job per script (:func:`job_for`): the children re-run the whole script, so they live as long
as it does, and a second ``fit`` (or a second Trainer) finds them at the same rendezvous. Rank
zero runs its stages in the calling thread; a supervisor thread (:func:`_watch_children`) polls
the children. Either may see the job end first, and both hand the end to the job's
:class:`~ddpkit._runtime.process.context.ProcessContext`, which ends it once:

- a child fails: the others are ended, and rank zero's stage is unwound (its collective also
  fails as soon as the child's sockets close); ``fit`` raises :class:`ChildFailedError`, root
  cause first;
- rank zero's stage raises: the children are ended and rank zero's own exception propagates,
  with a note saying how each child ended;
- SIGINT / SIGTERM to rank zero: the handler only sets a flag; the supervisor ends the children
  (SIGTERM, SIGKILL after 3 s) and ``fit`` raises ``KeyboardInterrupt`` / ``SystemExit(143)``;
- a stall: every rank's stack is dumped and the rank that never arrived is the root cause;
- the ranks disagree about the script (a child finished, or started a stage rank zero never
  called): the report says which, and that every rank must make the same Trainer calls.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from ddpkit._runtime.launch._env import bind_rendezvous, launchable_environment, rank_env
from ddpkit._runtime.launch._interrupter import StageAbort, StageInterrupter
from ddpkit._runtime.process.context import (
    ChildFailed,
    Interrupted,
    ProcessContext,
    RankZero,
    RankZeroFailed,
)
from ddpkit._runtime.process.ending import (
    GRACE_SECONDS,
    POLL_SECONDS,
    STALL_GATHER_SECONDS,
    first_failure,
)
from ddpkit._runtime.process.files import JobFiles
from ddpkit._runtime.process.proc import Proc, Rank, start_rank
from ddpkit._runtime.process.signals import SignalFlag
from ddpkit._runtime.ranks._errorfile import is_peer_loss
from ddpkit._runtime.ranks._names import (
    ENV_ERROR_FILE,
    ENV_JOB_KEY,
    ENV_SKIP_STAGES,
    ENV_STAGE_FILE,
)
from ddpkit._runtime.ranks._rendezvous import StoreHost
from ddpkit._runtime.ranks._stall import StallReport
from ddpkit._runtime.restart.attempt import Attempt
from ddpkit._tracebacks import first_line, install_folding_hook
from ddpkit.errors import ChildFailedError, LaunchError
from ddpkit.plugins.training_type.ddp import DDPPlugin

R = TypeVar("R")
_WHAT = "DDP (subprocess launcher)"
_FIX = (
    "check that the command runs on its own (the interpreter and the script exist and are "
    "executable)."
)
#: when rank zero's collective fails, how long a child has to show that it died first
RANK_ZERO_PEER_LOSS_SECONDS = 3.0


class ScriptJob:
    """The children of this script and their supervision; see the module docstring."""

    def __init__(
        self,
        plugin: DDPPlugin,
        command: Callable[[], list[str]],
        attempt: Attempt | None = None,
        skip: int = 0,
    ) -> None:
        """``attempt``: the restart this job is; ``skip``: how many of the script's stages
        ended in earlier jobs (the children are told both)."""
        env = launchable_environment(plugin)  # checks the rendezvous before the command
        argv = command()  # raises before anything starts when there is nothing to re-run
        self.num_processes = plugin.num_processes
        self.world_size = plugin.world_size
        self.node_rank = plugin.node_rank
        self.rank_zero = RankZero(rank=self.node_rank * self.num_processes)
        self.stages = 0  # the stages rank zero has started
        self.exiting = self.failure_reported = False
        self.script_raised: str | None = None
        self.signals = SignalFlag()
        self.interrupter = StageInterrupter()
        self.host: StoreHost | None = None
        self.files: JobFiles | None = None
        try:
            self.rendezvous = bind_rendezvous(plugin, env)  # before any child starts
            self.host = self.rendezvous.host
            self.child_extra = {ENV_JOB_KEY: self.rendezvous.key, **(attempt or Attempt()).env()}
            if skip:
                self.child_extra[ENV_SKIP_STAGES] = str(skip)
            self.files = files = JobFiles()
            self.context = ProcessContext(_WHAT, files.record_of, rank_zero=self.rank_zero)
            self.context.start(self._children(argv))
        except BaseException:
            self.close()
            self.signals.close()
            raise
        install_folding_hook()  # the report that ends the script: its frames of ddpkit folded
        self._previous_excepthook = sys.excepthook
        sys.excepthook = self._excepthook
        atexit.register(self.at_exit)
        self._watcher = threading.Thread(
            target=_watch_children, args=(self,), name="ddpkit-watch", daemon=True
        )
        self._watcher.start()

    # -- start ----------------------------------------------------------------------------------

    def _children(self, command: list[str]) -> list[tuple[int, Callable[[], Proc]]]:
        """How each child starts: this script again, with its rank's environment."""
        assert self.files is not None
        starters: list[tuple[int, Callable[[], Proc]]] = []
        for local_rank in range(1, self.num_processes):
            rank = self.rank_zero.rank + local_rank
            env = rank_env(
                os.environ,
                main_address=self.rendezvous.address,
                main_port=self.rendezvous.port,
                world_size=self.world_size,
                node_rank=self.node_rank,
                local_rank=local_rank,
                parent_pid=os.getpid(),
                extra={
                    ENV_ERROR_FILE: str(self.files.error_file(rank)),
                    ENV_STAGE_FILE: str(self.files.stage_file(rank)),
                    **self.child_extra,
                },
            )
            cannot = f"could not start local rank {local_rank}"
            starters.append((rank, functools.partial(start_rank, command, env, cannot, _FIX)))
        return starters

    def stages_of(self, rank: int) -> int:
        """How many stages a child has started (it says so in its stage file)."""
        return 0 if self.files is None else self.files.stages_of(rank)

    def _excepthook(
        self, kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        self.script_raised = kind.__name__
        self._previous_excepthook(kind, value, tb)

    # -- rank zero's stages ---------------------------------------------------------------------

    def run(self, plugin: DDPPlugin, stage: str, fn: Callable[..., R], args: tuple[Any, ...]) -> R:
        self._check_before(stage)
        self.rank_zero.stage = stage
        self.stages += 1
        with self.signals:
            try:
                try:
                    self.interrupter.arm()
                    with plugin.joining(self.rendezvous, self.on_rank_zero_stall, self.stages):
                        result = fn(*args)
                finally:
                    self.interrupter.disarm()
            except BaseException as exc:
                self.interrupter.disarm()  # again: the abort may have landed in the first call
                plugin.finish_teardown()  # the abort may have landed in the stage's teardown
                error = self._outcome(exc)
                if error is exc:
                    raise
                # The report (or the interrupt) says it all; the lost-peer error is noise.
                raise error from None
            if self.signals.signum is not None or self.context.claimed:
                # Something happened just as the stage ended: it still ends the job.
                raise self._outcome(None) from None
        return result

    def _check_before(self, stage: str) -> None:
        sup = self.context
        if sup.claimed:
            error = sup.settled()
            if isinstance(error, ChildFailedError):
                self.failure_reported = True
                raise error
            raise LaunchError(
                f"Trainer.{stage}: the other ranks of this script have already ended; a script "
                f"runs its ranks once. Fix: start the script again."
            )
        for h in sup.ranks:
            code = h.poll()
            if code is None:
                continue
            error = LaunchError(
                f"Trainer.{stage}: rank {h.rank} (pid {h.pid}) has already exited (exit code "
                f"{code}), so it will never join this {stage}. Every rank must make the same "
                f"Trainer calls: a call under `if trainer.is_global_zero:` runs on rank 0 "
                f"only. Fix: make the call on every rank."
            )
            sup.conclude(RankZeroFailed(error, f"after rank {h.rank} exited before {stage}"))
            raise error

    def _outcome(self, exc: BaseException | None) -> BaseException:
        """What rank zero raises once its stage ended with ``exc`` (None: it returned)."""
        sup = self.context
        signum = self.signals.signum
        if signum is not None:
            sup.conclude(Interrupted(signum))
        if exc is not None:
            self._wait_for_root_cause(exc)  # returns at once when the job has ended already
            # Nobody else saw a failure: rank zero is the root cause.
            rank = self.rank_zero.rank
            sup.conclude(RankZeroFailed(exc, f"after rank {rank} failed ({first_line(exc)})"))
        error = sup.settled()
        if error is None:
            raise RuntimeError("the job ended without a recorded outcome")  # a bug, not input
        if error is exc or sup.interrupted is not None:
            return error
        self.failure_reported = True
        return self._with_rank_zero_line(error, exc)

    def _wait_for_root_cause(self, exc: BaseException) -> None:
        """Rank zero often fails *because* a child died (its collective lost the peer): give the
        supervisor a moment to see that death, so the report blames the right rank."""
        consequence = isinstance(exc, StageAbort) or is_peer_loss(exc)
        wait = RANK_ZERO_PEER_LOSS_SECONDS if consequence else 0.0
        deadline = time.monotonic() + wait
        sup = self.context
        while not sup.claimed:
            exited = (h for h in sup.ranks if h.poll() is not None)
            culprit = first_failure(sup.ranks, sup.record_of) or next(exited, None)
            if culprit is not None:
                sup.conclude(ChildFailed(culprit))
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(POLL_SECONDS)

    def _with_rank_zero_line(
        self, error: BaseException, exc: BaseException | None
    ) -> BaseException:
        rank = self.rank_zero.rank
        if not isinstance(error, ChildFailedError) or any(f.rank == rank for f in error.failures):
            return error
        root = error.root_cause
        if exc is None or isinstance(exc, StageAbort):
            how = f"this process; interrupted by ddpkit after rank {root.rank} failed"
        elif is_peer_loss(exc):
            how = f"this process; ended by ddpkit after rank {root.rank} failed"
        else:
            how = f"this process; then failed: {first_line(exc)}"
        line = self.rank_zero.line(how)
        return ChildFailedError([root, line, *error.failures[1:]], what=error.what)

    def on_rank_zero_stall(self, report: StallReport) -> None:
        """Rank zero's stall handler (in its watchdog thread): record the report. The children
        answer the same alarm and exit; the supervisor sees that and makes the report, with a
        rank that never arrived (possibly rank zero) as the root cause."""
        self.rank_zero.stall = report
        self.rank_zero.stall_at = time.monotonic()

    # -- exit -------------------------------------------------------------------------------------

    def at_exit(self) -> None:
        """The script is over on rank zero: wait for the children to finish theirs (or end them
        at once when rank zero's script failed), report a failure not yet reported, clean up."""
        self.exiting = True
        sup = self.context
        if self.script_raised is not None:
            rank = self.rank_zero.rank
            sup.conclude(
                RankZeroFailed(None, f"after rank {rank}'s script raised {self.script_raised}")
            )
        with self.signals:
            while self._watcher.is_alive():
                self._watcher.join(timeout=POLL_SECONDS * 4)
            if sup.claimed:
                sup.settled()
        self.close()
        self.signals.close()
        if isinstance(sup.error, ChildFailedError) and not self.failure_reported:
            # A child failed after rank zero's last stage: the script failed, but atexit cannot
            # change the exit status. (An interrupt already set it: KeyboardInterrupt or
            # SystemExit(143) propagated through the script.)
            sys.stderr.write(f"ddpkit: {sup.error}\n")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)

    def retire(self) -> None:
        """A restart replaces this failed job (its children are ended): let go of the rest."""
        self._watcher.join()
        atexit.unregister(self.at_exit)
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_excepthook
        self.close()
        self.signals.close()

    def close(self) -> None:
        if self.files is not None:
            self.files.close()
        if self.host is not None:
            self.host.close()


# -- the supervisor thread: polls the children while rank zero runs its stages, and hands what it
# sees to the job's ProcessContext --------------------------------------------------------------


def _watch_children(job: ScriptJob) -> None:
    """Poll the children of ``job`` until the job ends."""
    ctx = job.context
    early_exit_since: float | None = None
    while not ctx.claimed:
        outcome = ctx.look(job.signals)
        if outcome is None and (silent := _silent_after_stall(job)) is not None:
            outcome = ChildFailed(silent)
        if outcome is not None:
            if ctx.conclude(outcome):
                _unwind_stage(job)
            return
        exited = [h for h in ctx.ranks if h.poll() is not None]
        if exited and len(exited) == len(ctx.ranks) and not job.interrupter.armed:
            return  # every child finished its script
        if exited and job.interrupter.armed and job.rank_zero.stall is None:
            # A child that finished its script while rank zero is in a stage never joins
            # it: at once if it never started this stage, after the grace period if it did
            # (the very end of a stage may race with a fast child's exit).
            early_exit_since = early_exit_since or time.monotonic()
            never_started = job.stages_of(exited[0].rank) < job.stages
            waited = time.monotonic() - early_exit_since > GRACE_SECONDS
            if (never_started or waited) and ctx.conclude(ChildFailed(exited[0])):
                _unwind_stage(job)
                return
        else:
            early_exit_since = None
        ahead = [h for h in ctx.ranks if job.stages_of(h.rank) > job.stages]
        if job.exiting and ahead:
            _stage_without_rank_zero(job, ahead[0])
            return


def _stage_without_rank_zero(job: ScriptJob, ahead: Rank) -> None:
    n = job.stages_of(ahead.rank)
    rank = job.rank_zero.rank
    note = (
        f"started its stage #{n} after rank {rank}'s script had ended with {job.stages}: "
        f"every rank must make the same Trainer calls (a call under "
        f"`if not trainer.is_global_zero:` runs on the other ranks only)"
    )
    job.context.conclude(
        ChildFailed(ahead, note=note, rank_zero_note="this process; its script ended")
    )


def _unwind_stage(job: ScriptJob) -> None:
    """Unwind rank zero's stage; if it cannot be (a C call that never returns), report and
    end this process after the grace period."""
    if job.interrupter.interrupt(GRACE_SECONDS):
        return
    error = job.context.error
    if error is not None:
        sys.stderr.write(f"ddpkit: {error}\n")
    sys.stderr.write(
        f"ddpkit: rank {job.rank_zero.rank}'s main thread did not return within "
        f"{GRACE_SECONDS:g} s (it is inside a call that cannot be interrupted); ending this "
        f"process.\n"
    )
    sys.stderr.flush()
    job.close()
    signum = job.context.interrupted
    os._exit(128 + signum if signum is not None else 1)


def _silent_after_stall(job: ScriptJob) -> Rank | None:
    """A child that has not answered the stall alarm long after rank zero did: it never
    arrived, and is stuck where even its watchdog thread cannot run."""
    since = job.rank_zero.stall_at
    if since is None or time.monotonic() - since < STALL_GATHER_SECONDS:
        return None
    return next((h for h in job.context.ranks if h.poll() is None), None)


_job: ScriptJob | None = None
#: the stages of this script that ended in jobs that failed since (their children are gone)
_stages_before = 0


def job_for(
    plugin: DDPPlugin, command: Callable[[], list[str]], attempt: Attempt | None = None
) -> ScriptJob:
    """This script's job: started by its first launch (or a restart's, ``attempt``); every
    later launch must ask for the same ranks (the children re-run the whole script)."""
    global _job
    if _job is None:
        _job = ScriptJob(plugin, command, attempt, skip=_stages_before)
        return _job
    if (_job.num_processes, _job.world_size) != (plugin.num_processes, plugin.world_size):
        raise LaunchError(
            f"this script already runs {_job.world_size} ranks ({_job.num_processes} per "
            f"node), and a second Trainer asks for {plugin.world_size} "
            f"({plugin.num_processes} per node): the other ranks re-run the script, so every "
            f"Trainer of a script must use the same devices and num_nodes. Fix: pass the "
            f"same devices and num_nodes to every Trainer of the script."
        )
    return _job


def retire_job() -> None:
    """Before a restart: the failed job goes; the next launch starts a new one, whose children
    skip the stages that ended before the one that failed."""
    global _job, _stages_before
    if _job is None:
        return
    _stages_before += max(0, _job.stages - 1)
    _job.retire()
    _job = None


def current_job() -> ScriptJob | None:
    """This script's job, if a launch started one (tests look at its scratch directory)."""
    return _job
