"""What only the file system can tell, checked before any rank starts: every folder the stage
will write into (checkpoints, logs) can be made and written — else an error now, not after an
epoch's work with nothing saved.

Reading only (``os.access`` on the nearest folder that exists): nothing is created here, so any
process may run it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._reprs import safe_repr

__all__ = ["check_folders", "folders_of"]


def folders_of(
    trainer: Any, fn: str, callbacks: Iterable[Any], loggers: Iterable[Any]
) -> list[tuple[str, str]]:
    """``(who, folder)`` for every folder the stage writes into: the loggers' (every stage) and
    the checkpoint callbacks' (``fit``)."""
    found: list[tuple[str, str]] = []
    for logger in loggers:
        folders = getattr(logger, "folders_to_write", None)
        if callable(folders):
            save_dir = safe_repr(getattr(logger, "save_dir", None))
            who = f"{type(logger).__name__}(save_dir={save_dir})"
            found += [(who, f) for f in folders()]
    if fn == "fit" and not trainer.fast_dev_run:  # fast_dev_run saves no checkpoint
        for callback in callbacks:
            folders = getattr(callback, "folders_to_write", None)
            if callable(folders):
                given = getattr(callback, "dirpath", None)
                shown = f"dirpath={safe_repr(given)}" if given is not None else ""
                found += [(f"{type(callback).__name__}({shown})", f) for f in folders(trainer)]
    return found


def check_folders(fn: str, folders: Iterable[tuple[str, str]]) -> None:
    """Each folder exists as a folder or can be created, in a place this process may write."""
    for who, folder in folders:
        path = Path(folder).expanduser().absolute()
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise MisconfigurationError(
                f"Trainer.{fn}: {who} writes into {str(path)!r}, but {str(existing)!r} is a file, "
                f"so that folder cannot exist. Fix: point it at a folder (or move the file)."
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            what = "that folder" if existing == path else f"{str(existing)!r}, where it would go,"
            raise MisconfigurationError(
                f"Trainer.{fn}: {who} writes into {str(path)!r}, but {what} is not writable by "
                f"this process (uid {getattr(os, 'geteuid', lambda: '?')()}). Fix: point it at "
                f"a folder you can write to, or change the folder's permissions."
            )
