"""Showing a user's value in a message: its ``repr``, or its type when ``repr`` itself fails (a
message about a bad value must never crash on that value)."""

from __future__ import annotations

from typing import Any


def safe_repr(value: Any) -> str:
    """``repr(value)``; where that raises (or returns no string), ``<Type object>`` — inside a
    list, tuple or dict only for the item whose ``repr`` failed."""
    try:
        text = repr(value)
    except Exception:  # whatever the user's __repr__ raises
        text = None
    if isinstance(text, str):
        return text
    if type(value) in (list, tuple):
        items = [safe_repr(item) for item in value]
        if type(value) is tuple:
            return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        return f"[{', '.join(items)}]"
    if type(value) is dict:
        return "{" + ", ".join(f"{safe_repr(k)}: {safe_repr(v)}" for k, v in value.items()) + "}"
    return f"<{type(value).__qualname__} object>"
