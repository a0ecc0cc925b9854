"""A path given to a constructor, checked when the object is built: one with a NUL byte names no
file on any system, and ``os`` refuses it with a bare ``ValueError: embedded null byte`` at the
first file operation — inside a run, after its work."""

from __future__ import annotations

import os
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
