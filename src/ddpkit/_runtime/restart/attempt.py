"""Which attempt of a launch that may restart this process runs: from the environment its
launcher gave it (torchrun's ``TORCHELASTIC_RESTART_COUNT``, ddpkit's ``DDPKIT_RUN_*``), or, in
the launching process that runs an attempt itself, in-process."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ddpkit._runtime.ranks._names import (
    ENV_MAX_RESTARTS,
    ENV_RESTART_CAUSE,
    ENV_RESTART_COUNT,
    ENV_RUN_DIR,
    ENV_RUN_STARTED,
)
from ddpkit.utilities._procs import started_at


def _int(value: str | None) -> int:
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0


@dataclass(frozen=True)
class Attempt:
    """One attempt of a launch that may restart."""

    #: 0 first, k for the k-th restart
    number: int = 0
    #: how many restarts the launch may make (0: none, or not known)
    max_restarts: int = 0
    #: why the previous attempt ended, as its root cause's report line ('' when not known)
    cause: str = ""
    #: when the first attempt started (time.time()); None: not known
    started: float | None = None
    #: the launcher's private folder of the run (ddpkit's own checkpoint goes there)
    run_dir: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Attempt:
        started = env.get(ENV_RUN_STARTED)
        try:
            when = float(started) if started else None
        except ValueError:
            when = None
        return cls(
            number=_int(env.get(ENV_RESTART_COUNT)),
            max_restarts=_int(env.get(ENV_MAX_RESTARTS)),
            cause=env.get(ENV_RESTART_CAUSE, ""),
            started=when,
            run_dir=env.get(ENV_RUN_DIR) or None,
        )

    def env(self) -> dict[str, str]:
        """The variables the ranks of this attempt get (none when the launch cannot restart)."""
        if self.max_restarts == 0:
            return {}
        env = {ENV_RESTART_COUNT: str(self.number), ENV_MAX_RESTARTS: str(self.max_restarts)}
        if self.started is not None:
            env[ENV_RUN_STARTED] = repr(self.started)
        if self.cause:
            env[ENV_RESTART_CAUSE] = self.cause
        if self.run_dir is not None:
            env[ENV_RUN_DIR] = self.run_dir
        return env

    def since(self) -> float | None:
        """Checkpoints written from this moment on belong to the run: when the first attempt
        started, else when the parent of this rank started (the process that restarts it)."""
        return self.started if self.started is not None else started_at(os.getppid())


_in_process: Attempt | None = None


@contextlib.contextmanager
def attempt_in_process(attempt: Attempt) -> Iterator[None]:
    """For the length of one attempt, in the launching process (rank 0 of the subprocess
    launcher): which attempt it is."""
    global _in_process
    previous, _in_process = _in_process, attempt
    try:
        yield
    finally:
        _in_process = previous


def in_process() -> bool:
    """True in the launching process while it runs an attempt itself (subprocess rank 0)."""
    return _in_process is not None


def current_attempt(env: Mapping[str, str] | None = None) -> Attempt:
    """This process's attempt: the launcher's word in-process, else the environment."""
    if _in_process is not None:
        return _in_process
    return Attempt.from_env(os.environ if env is None else env)
