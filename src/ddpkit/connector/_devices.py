"""Device spellings: ``devices`` and legacy ``gpus`` in every form users write them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.connector._types import DeviceKind
from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._reprs import safe_repr


@dataclass(frozen=True)
class DeviceRequest:
    """A device spelling, parsed. ``source`` is the flag as written, for reasons."""

    kind: DeviceKind
    count: int = 0
    ids: tuple[int, ...] = ()
    source: str = ""

    def same_as(self, other: DeviceRequest) -> bool:
        return (self.kind, self.count, self.ids) == (other.kind, other.count, other.ids)


_FIX = "Fix: pass a count (devices=2), a list of GPU ids (devices=[0, 1]), -1 for all, or 'auto'."


def parse_device_spelling(call: str, flag: str, value: Any) -> DeviceRequest | None:
    """Parse ``devices`` / ``gpus``. ``None`` = not given. ``call`` is the user's call, quoted at
    the start of every message.

    ``2`` → two devices; ``-1``, ``"-1"`` → all; ``[1]``, ``"1,"``, ``"0,1"`` → those ids;
    ``"2"`` → two devices; ``"auto"`` → the accelerator's default; ``0``, ``[]`` → none.
    """
    # Flags.of froze a list into a tuple: show it as the list the user wrote.
    shown = list(value) if isinstance(value, tuple) else value
    source = f"{flag}={safe_repr(shown)}"
    if value is None:
        return None
    if isinstance(value, bool):
        raise MisconfigurationError(f"{call}: {source} is a bool, not a device count. {_FIX}")
    if isinstance(value, int):
        return _count(call, source, value)
    if isinstance(value, str):
        return _text(call, flag, source, value)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return _ids(call, tuple(value), source)
    raise MisconfigurationError(
        f"{call}: {source} is a {type(value).__name__}; expected an int, a list of ids, a "
        f"string or 'auto'. {_FIX}"
    )


def _count(call: str, source: str, value: int) -> DeviceRequest:
    if value == -1:
        return DeviceRequest("all", source=source)
    if value < 0:
        raise MisconfigurationError(
            f"{call}: {source}: a device count must be ≥ 0, or -1 for all devices. {_FIX}"
        )
    return DeviceRequest("count", count=value, source=source)


def _text(call: str, flag: str, source: str, value: str) -> DeviceRequest:
    text = value.strip()
    if text == "auto":
        return DeviceRequest("auto", source=source)
    if "," in text:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not all(p.isascii() and p.isdigit() for p in parts):
            raise MisconfigurationError(
                f"{call}: {source}: expected device ids such as '0,1'. {_FIX}"
            )
        return _ids(call, tuple(int(p) for p in parts), source)
    if not (text.isascii() and text.lstrip("-").isdigit()):
        raise MisconfigurationError(
            f"{call}: {source}: expected a count ('2'), ids ('0,1'), '-1' or 'auto'. {_FIX}"
        )
    return _count(call, source, int(text))


def _ids(call: str, ids: tuple[Any, ...], source: str) -> DeviceRequest:
    if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in ids):
        raise MisconfigurationError(f"{call}: {source}: device ids must be integers ≥ 0. {_FIX}")
    if len(set(ids)) != len(ids):
        raise MisconfigurationError(
            f"{call}: {source}: a device id appears twice. Fix: list each GPU once."
        )
    if not ids:
        return DeviceRequest("count", count=0, source=source)
    return DeviceRequest("ids", ids=ids, count=len(ids), source=source)
