"""Paths the user gives: checked when the object is built (one with a NUL byte names no file on
any system, and ``os`` refuses it with a bare ``ValueError: embedded null byte`` at the first file
operation — inside a run, after its work), and opened as Lightning opens them
(:func:`local_path`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._reprs import safe_repr


def refuse_nul(owner: str, name: str, value: Any) -> None:
    """Refuse ``owner(name=value)`` when the path ``value`` (a str or os.PathLike; anything else
    is its caller's to check) holds a NUL byte."""
    if not isinstance(value, str | os.PathLike):
        return
    raw = os.fspath(value)
    if ("\x00" if isinstance(raw, str) else b"\x00") in raw:
        raise MisconfigurationError(
            f"{owner}({name}={safe_repr(value)}): the path holds a NUL byte ('\\x00'), which no "
            f"file system takes. Fix: drop it from {name}."
        )


def local_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as Lightning's file system (fsspec) opens a local one: ``~`` expanded. The
    paths a logger or checkpoint callback reports keep the ``~``, as Lightning's do; every file
    ddpkit reads, writes, lists or removes goes through here, so the files land where
    Lightning's would (``CSVLogger("~/logs")`` writes under the home folder, never into a
    folder named ``~``)."""
    return Path(os.path.expanduser(os.fspath(path)))
