"""Restarts, the rank's side: which attempt this is, and the checkpoint a restarted fit resumes
from. One contract for every launcher that restarts ranks — ddpkit's own (``max_restarts``),
torchrun (``--max-restarts``), ``ddpkit run --max-restarts``:

- the ranks of attempt ``k`` (``k ≥ 1``: the k-th restart) have ``TORCHELASTIC_RESTART_COUNT=k``
  in their environment, as torchrun sets it;
- rank 0 of a restarted fit then resumes from the newest *complete* checkpoint written since
  the run started (``DDPKIT_RUN_STARTED``; without it, since the process that restarts the
  ranks started — torchrun's agent, ``ddpkit run`` — which is the parent of every rank) in the
  fit's checkpoint folders, and tells the other ranks (:func:`newest_checkpoint`);
- rank 0 prints one line saying so (:func:`resume_line`), naming the cause when the launcher
  gave it (``DDPKIT_RESTART_CAUSE``).

Rank 0 of ddpkit's subprocess launcher is the user's own process, which the launcher does not
restart: it learns its attempt in-process (:func:`attempt_in_process`), its environment is left
as the user made it.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ddpkit.ranks.names import (
    ENV_MAX_RESTARTS,
    ENV_RESTART_CAUSE,
    ENV_RESTART_COUNT,
    ENV_RUN_DIR,
    ENV_RUN_STARTED,
)
from ddpkit.utilities.procs import started_at

__all__ = [
    "Attempt",
    "attempt_in_process",
    "current_attempt",
    "in_process",
    "is_complete",
    "newest_checkpoint",
    "resume_line",
]

#: the file name prefix of ModelCheckpoint(save_on_exception=True): one rank's state at a
#: failure, mid-step and without the other ranks' RNG: never resumed from
_EXCEPTION_PREFIX = "exception"


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


def is_complete(path: Path) -> bool:
    """True when ``path`` is a whole checkpoint: ``torch.save``'s zip format ends with its
    directory, which a write cut short never reached (Lightning writes its checkpoints in place,
    not atomically as ddpkit does)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def newest_checkpoint(
    folders: Iterable[str | os.PathLike[str]], since: float | None
) -> Path | None:
    """The newest complete ``*.ckpt`` in ``folders`` modified at or after ``since`` (None: any),
    or None. Hidden files (a write under way) and the exception checkpoints are never chosen."""
    found: list[tuple[int, Path]] = []
    for folder in dict.fromkeys(os.fspath(f) for f in folders):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if not name.endswith(".ckpt") or name.startswith((".", _EXCEPTION_PREFIX)):
                continue
            try:
                mtime = entry.stat().st_mtime_ns  # a link to the last one: its target's time
            except OSError:
                continue
            if since is None or mtime >= since * 1e9:
                found.append((mtime, Path(entry.path)))
    for _, path in sorted(found, key=lambda item: item[0], reverse=True):
        if is_complete(path):
            return path
    return None


def resume_line(attempt: Attempt, path: str | None, position: str) -> str:
    """What rank 0 of a restarted fit prints: the restart, its cause, where it resumes."""
    of = f" of {attempt.max_restarts}" if attempt.max_restarts else ""
    cause = f" after {attempt.cause}" if attempt.cause else ""
    where = f"resumes from {path} ({position})" if path else f"starts over ({position})"
    return f"ddpkit: restart {attempt.number}{of}{cause}: fit {where}"
