"""Every exception and warning ddpkit raises.

::

    Exception
     └── DDPKitError
          ├── MisconfigurationError   (also a ValueError: the flags cannot work together)
          ├── LaunchError             (a rank could not be started, or a port could not be bound)
          ├── ChildFailedError        (a rank failed; root cause first, then every other rank)
          ├── LightningRemovedError   (also an ImportError: a Lightning 1.x name or module that
          │                            ddpkit.lightning refuses; names the Lightning 2.x fix)
          ├── LightningRemovedAttributeError (also an AttributeError: the same for a member of
          │                            a Trainer, LightningModule, DataModule or Callback)
          ├── LightningUsageError     (also a RuntimeError: a 1.x API called as 1.x refused it,
          │                            raised as 1.x raised it)
          ├── LightningOnlyAttributeError (also an AttributeError: a Lightning 2.x member that
          │                            ddpkit's own Trainer, Module, DataModule, callback or
          │                            logger lacks; names the way: ddpkit's spelling or
          │                            ddpkit.lightning)
          ├── LightningOnlyImportError (also an ImportError: the same for a Lightning 2.x
          │                            callback or logger class that ddpkit lacks)
          ├── UnknownKeywordError     (also a TypeError: a keyword a ddpkit callback or logger
          │                            does not take: Lightning's, with the way, or a typo)
          └── UnusedParametersError   (also a RuntimeError: DDP waits for a parameter's gradient
                                       that the loss never produced; names the parameters)

    Warning
     └── DDPKitWarning                (UserWarning)
          └── DDPKitDeprecationWarning (FutureWarning: shown by default, names the modern call)

Every exception pickles, so it can cross a process boundary (spawned ranks report through it).
Messages follow one form: the call as the user wrote it, the problem with its numbers, one fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpkit._tracebacks import fold_hint

__all__ = [
    "ChildFailedError",
    "DDPKitDeprecationWarning",
    "DDPKitError",
    "DDPKitWarning",
    "LaunchError",
    "LightningOnlyAttributeError",
    "LightningOnlyImportError",
    "LightningRemovedAttributeError",
    "LightningRemovedError",
    "LightningUsageError",
    "MisconfigurationError",
    "MisconfigurationRuntimeError",
    "RankFailure",
    "UnknownKeywordError",
    "UnusedParametersError",
]


class DDPKitError(Exception):
    """Base of every error ddpkit raises."""

    def _render_traceback_(self) -> list[str]:
        """IPython's hook (a notebook, an IPython shell): the traceback as a script's uncaught
        error prints it, library frames folded, not IPython's page of every frame's source."""
        from ddpkit._tracebacks import fold, fold_hint, verbose

        if verbose():
            raise NotImplementedError  # IPython then shows its own, whole
        shown = fold(self, keep_all=False)
        text = shown.text + (fold_hint() if shown.folded and fold_hint() not in shown.text else "")
        return text.rstrip("\n").splitlines()


class MisconfigurationError(DDPKitError, ValueError):
    """The Trainer flags contradict each other or the machine."""


class MisconfigurationRuntimeError(MisconfigurationError, RuntimeError):
    """A call Lightning 2.x refuses with a ``RuntimeError``: ddpkit's refusal is one too, so code
    that catches Lightning's keeps working (several optimizers under automatic optimization)."""


class LaunchError(DDPKitError):
    """A rank could not be started (no script to re-run, a port that cannot be bound, ...)."""


@dataclass(frozen=True)
class RankFailure:
    """How one rank ended.

    ``exitcode`` is the process exit status, a negative value the signal that ended it, and
    ``None`` for a rank that is the reporting process itself (rank zero of the subprocess
    launcher), which has not exited. ``traceback`` is the rank's own Python traceback when it
    raised (or its stack when it stalled), else empty; ``folded`` says that its frames of ddpkit,
    torch and Python were folded (``DDPKIT_VERBOSE=1`` keeps them). ``note``, when set, says how
    it ended in words and replaces the exit status in the report. ``where`` is the innermost
    frame of the user's code in the traceback (``/path/x.py:16, in f: raise ...``).
    """

    rank: int
    pid: int
    exitcode: int | None
    traceback: str = ""
    note: str = ""
    where: str = ""
    folded: bool = False

    @property
    def signal_name(self) -> str | None:
        """'SIGKILL' for a rank a signal ended, else None."""
        if self.exitcode is None or self.exitcode >= 0:
            return None
        import signal

        try:
            return signal.Signals(-self.exitcode).name
        except ValueError:
            return f"signal {-self.exitcode}"

    @property
    def how(self) -> str:
        """One phrase: the note, else the exit status ('exit code 1', 'killed by signal ...')."""
        return self.note or self.exit_status

    @property
    def exit_status(self) -> str:
        """'exit code 1', 'killed by signal SIGTERM', or 'failed' for the reporting process."""
        name = self.signal_name
        if name == "SIGKILL":
            # Nothing in the rank could report it: say who usually sends it.
            return (
                "killed by signal SIGKILL (from outside the rank: often the out-of-memory killer)"
            )
        if name is not None:
            return f"killed by signal {name}"
        if self.exitcode is None:
            return "failed"
        return f"exit code {self.exitcode}"

    def line(self) -> str:
        """'rank 1 (pid 4242): exit code 1'."""
        return f"rank {self.rank} (pid {self.pid}): {self.how}"


class ChildFailedError(DDPKitError):
    """One or more ranks failed. ``failures[0]`` is the root cause; the rest say how others ended.

    The message starts with the root cause (rank, pid, how it ended, and the line of the user's
    code it raised at), then its traceback, once, then one line per other rank; when frames were
    folded, the last line says how to see them.
    """

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
        what = self.what or "distributed run"
        if not self.failures:
            return f"{what} failed"
        root = self.failures[0]
        lines = [f"{what} failed: rank {root.rank} (pid {root.pid}) is the root cause, {root.how}."]
        if root.where:
            lines.append(f"  at {root.where}")
        if root.traceback:
            lines += ["", f"--- rank {root.rank} ---", root.traceback.rstrip(), "---"]
        lines += [other.line() for other in self.failures[1:]]
        if any(f.folded for f in self.failures):
            lines.append(fold_hint())
        return "\n".join(lines)


class LightningRemovedError(DDPKitError, ImportError):
    """A Lightning 1.x module or name that ``ddpkit.lightning`` does not provide (removed in
    Lightning 2.x, or out of ddpkit's scope): the 1.x name, why, and the 2.x fix. An
    ``ImportError``, so that ``from ddpkit.lightning.x import Name`` shows this message."""


class LightningRemovedAttributeError(DDPKitError, AttributeError):
    """A member of Lightning 1.x's ``Trainer``, ``LightningModule``, ``LightningDataModule`` or
    ``Callback`` that ``ddpkit.lightning`` does not provide: why, and the 2.x fix. An
    ``AttributeError``, so that ``hasattr`` and ``getattr(obj, name, default)`` still work."""


class LightningUsageError(DDPKitError, RuntimeError):
    """A Lightning 1.x API called in a way Lightning 1.x refused as well, raised as the
    ``RuntimeError`` 1.x raised (1.x code that catches it keeps working), with the fix."""


class LightningOnlyAttributeError(DDPKitError, AttributeError):
    """A member of Lightning 2.x's ``Trainer``, ``LightningModule``, ``LightningDataModule``,
    ``Callback``, a built-in callback or a logger that ddpkit's counterpart does not have (the
    table: docs/lightning-2x-surface.md): why, and the way — ddpkit's own spelling, or a
    ``LightningModule`` on ``ddpkit.lightning.Trainer``. An ``AttributeError``, so that
    ``hasattr`` and ``getattr(obj, name, default)`` still work."""


class LightningOnlyImportError(DDPKitError, ImportError):
    """A callback or logger class of Lightning 2.x that ``ddpkit.callbacks`` /
    ``ddpkit.loggers`` do not have: why, and the way. An ``ImportError``, so that
    ``from ddpkit.callbacks import Name`` shows this message."""


class UnknownKeywordError(DDPKitError, TypeError):
    """A keyword that a ddpkit callback or logger does not take: Lightning 2.x's (why, and the
    way), or a misspelling (the keywords it takes). A ``TypeError``, as Python's own for an
    unexpected keyword argument."""


class UnusedParametersError(DDPKitError, RuntimeError):
    """With ``find_unused_parameters=False``, parameters took no part in the loss and DDP waits
    for their gradients: the parameters by name, the fix, then torch's own message."""


class DDPKitWarning(UserWarning):
    """Base of every warning ddpkit emits."""


class DDPKitDeprecationWarning(DDPKitWarning, FutureWarning):
    """A legacy spelling: it still works, and the message names the exact modern call."""
