"""Words for error messages: the sorted choices of a closed set, and a did-you-mean."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


def choices(names: Iterable[Any]) -> str:
    """``'cpu', 'gpu'``: the names, sorted and quoted."""
    return ", ".join(repr(n) for n in sorted(names))


def did_you_mean(word: Any, names: Iterable[Any]) -> str:
    """``" (did you mean 'ddp'?)"`` for a near miss of one of ``names``, else ``""``."""
    if not isinstance(word, str):
        return ""
    options = {str(n).lower(): str(n) for n in names}
    close = difflib.get_close_matches(word.lower(), list(options), n=1, cutoff=0.6)
    return f" (did you mean {options[close[0]]!r}?)" if close else ""
