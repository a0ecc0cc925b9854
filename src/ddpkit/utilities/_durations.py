"""A duration as Lightning takes one (``max_time``, ``Timer(duration=...)``): ``"DD:HH:MM:SS"``,
a ``datetime.timedelta`` or a dict of ``timedelta`` keywords — checked, with the call quoted.

Zero and negative durations are taken, as Lightning 2.x takes them: the time is already up, so
the ``Timer`` stops the fit at its first check (``on_fit_start``). A deadline computed as
``deadline - datetime.now()`` may well be past, and Lightning's code with it runs here too."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._reprs import safe_repr

_TIME = re.compile(r"^(\d+):(\d{1,2}):(\d{1,2}):(\d{1,2})$")
_UNITS = ("days", "hours", "minutes", "seconds", "milliseconds", "microseconds", "weeks")


def parse_duration(owner: str, name: str, value: Any) -> timedelta | None:
    """``value`` as a ``timedelta`` (None stays None; zero or negative: the time is already
    up); else a MisconfigurationError quoting ``owner(name=value)``."""
    fix = f"Fix: {owner}({name}='00:12:00:00') (12 hours) or {name}={{'hours': 12}}."

    def bad(problem: str) -> MisconfigurationError:
        return MisconfigurationError(f"{owner}({name}={safe_repr(value)}): {problem} {fix}")

    if value is None:
        return None
    if isinstance(value, timedelta):
        found = value
    elif isinstance(value, str):
        match = _TIME.match(value.strip())
        if match is None:
            raise bad("a string must read DD:HH:MM:SS.")
        d, h, m, s = (int(g) for g in match.groups())
        found = timedelta(days=d, hours=h, minutes=m, seconds=s)
    elif isinstance(value, dict):
        unknown = sorted(str(k) for k in value if k not in _UNITS)
        if unknown:
            raise bad(f"unknown units {unknown}; use {sorted(_UNITS)}.")
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in value.values()
        ):
            raise bad("every unit needs a finite number.")
        try:
            found = timedelta(**value)
        except OverflowError as error:
            raise bad(f"{error}.") from error
    else:
        raise bad("pass 'DD:HH:MM:SS', a datetime.timedelta or a dict.")
    return found
