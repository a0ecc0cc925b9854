"""Every exception and warning ddpkit raises.

::

    Exception
     └── DDPKitError
          ├── MisconfigurationError   (also a ValueError: the flags cannot work together)
          ├── LaunchError             (a rank could not be started, or a port could not be bound)
          └── ChildFailedError        (a rank failed; root cause first, then every other rank)

    Warning
     └── DDPKitWarning                (UserWarning)
          └── DDPKitDeprecationWarning (FutureWarning: shown by default, names the modern call)

Every exception pickles, so it can cross a process boundary (spawned ranks report through it).
Messages follow one form: the call as the user wrote it, the problem with its numbers, one fix.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ChildFailedError",
    "DDPKitDeprecationWarning",
    "DDPKitError",
    "DDPKitWarning",
    "LaunchError",
    "MisconfigurationError",
    "RankFailure",
]


class DDPKitError(Exception):
    """Base of every error ddpkit raises."""


class MisconfigurationError(DDPKitError, ValueError):
    """The Trainer flags contradict each other or the machine."""


class LaunchError(DDPKitError):
    """A rank could not be started (no script to re-run, a port that cannot be bound, ...)."""


@dataclass(frozen=True)
class RankFailure:
    """How one rank ended.

    ``exitcode`` is the process exit status; a negative value is the signal that ended it.
    ``traceback`` is the rank's own Python traceback when it raised, else empty.
    """

    rank: int
    pid: int
    exitcode: int
    traceback: str = ""
    note: str = ""

    @property
    def how(self) -> str:
        """One phrase: 'exit code 1', 'signal SIGKILL', 'ended by ddpkit (SIGTERM)'."""
        if self.note:
            return self.note
        if self.exitcode < 0:
            import signal

            try:
                name = signal.Signals(-self.exitcode).name
            except ValueError:
                name = str(-self.exitcode)
            return f"killed by signal {name}"
        return f"exit code {self.exitcode}"


class ChildFailedError(DDPKitError):
    """One or more ranks failed. ``failures[0]`` is the root cause; the others follow."""

    def __init__(
        self, failures: list[RankFailure] | tuple[RankFailure, ...], what: str = ""
    ) -> None:
        self.failures = tuple(failures)
        self.what = what
        super().__init__(self._message())

    def __reduce__(self) -> tuple[type[ChildFailedError], tuple[tuple[RankFailure, ...], str]]:
        return (type(self), (self.failures, self.what))

    @property
    def root_cause(self) -> RankFailure:
        return self.failures[0]

    def _message(self) -> str:
        if not self.failures:
            return f"{self.what or 'distributed run'} failed"
        root = self.failures[0]
        lines = [
            f"{self.what or 'distributed run'} failed: rank {root.rank} (pid {root.pid}) "
            f"is the root cause, {root.how}."
        ]
        if root.traceback:
            lines += ["", f"--- traceback of rank {root.rank} ---", root.traceback.rstrip(), ""]
        for other in self.failures[1:]:
            lines.append(f"rank {other.rank} (pid {other.pid}): {other.how}")
        return "\n".join(lines)


class DDPKitWarning(UserWarning):
    """Base of every warning ddpkit emits."""


class DDPKitDeprecationWarning(DDPKitWarning, FutureWarning):
    """A legacy spelling: it still works, and the message names the exact modern call."""
