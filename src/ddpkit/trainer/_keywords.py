"""Checking the loop keywords of ``Trainer(...)`` one by one.

Every message quotes the call as written (``Trainer(max_steps=None)``), states the problem and
ends with one fix; an unknown keyword gets a did-you-mean.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from ddpkit.callbacks._dispatch import is_callback
from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._durations import parse_duration
from ddpkit.utilities._paths import refuse_nul
from ddpkit.utilities._reprs import safe_repr
from ddpkit.utilities._suggest import did_you_mean


def call(name: str, value: Any) -> str:
    return f"Trainer({name}={safe_repr(value)})"


def bad(name: str, value: Any, problem: str) -> MisconfigurationError:
    return MisconfigurationError(f"{call(name, value)}: {problem}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_bool(name: str, value: Any, *, allow_none: bool = False) -> bool | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, bool):
        raise bad(name, value, f"pass True or False. Fix: Trainer({name}=True).")
    return value


def check_int(
    name: str, value: Any, *, minimum: int, allow_none: bool = False, meaning: str = ""
) -> int | None:
    """An int ≥ ``minimum`` (``meaning`` says what the lowest values do)."""
    if value is None and allow_none:
        return None
    hint = f" ({meaning})" if meaning else ""
    if not _is_int(value):
        kind = "None" if value is None else type(value).__name__
        raise bad(
            name,
            value,
            f"got {kind}; pass an int ≥ {minimum}{hint}. Fix: Trainer({name}={max(minimum, 1)}).",
        )
    if value < minimum:
        raise bad(
            name, value, f"must be ≥ {minimum}{hint}. Fix: Trainer({name}={max(minimum, 1)})."
        )
    return int(value)


def check_limit(name: str, value: Any, *, allow_none: bool = True) -> int | float | None:
    """A count of batches (int ≥ 0) or a fraction of the loader (float in [0, 1])."""
    if value is None and allow_none:
        return None
    if _is_int(value):
        if value < 0:
            raise bad(name, value, f"a count of batches must be ≥ 0. Fix: Trainer({name}=10).")
        return int(value)
    if isinstance(value, float):
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise bad(
                name,
                value,
                f"a fraction of the batches must lie in [0.0, 1.0]; an int counts batches. "
                f"Fix: Trainer({name}=0.25).",
            )
        return value
    raise bad(
        name,
        value,
        f"pass an int (batches) or a float in [0.0, 1.0] (a fraction). Fix: Trainer({name}=0.25).",
    )


def check_path(name: str, value: Any) -> str | None:
    if value is None:
        return None
    refuse_nul("Trainer", name, value)
    if not isinstance(value, str | os.PathLike):
        raise bad(
            name, value, f"pass a folder path (str or pathlib.Path). Fix: Trainer({name}='runs')."
        )
    return os.fspath(value)


def parse_max_time(name: str, value: Any) -> timedelta | None:
    """``"DD:HH:MM:SS"``, a ``timedelta`` or a dict of ``timedelta`` keywords."""
    return parse_duration("Trainer", name, value)


def unknown_keyword(name: str, value: Any, known: Iterable[str]) -> MisconfigurationError:
    names = sorted(set(known))
    hint = did_you_mean(name, names)
    if hint:
        return bad(name, value, f"no such keyword{hint}")
    return bad(name, value, f"no such keyword. The keywords are: {', '.join(names)}.")


def check_accumulation(value: Any) -> tuple[int, tuple[tuple[int, int], ...]]:
    name = "accumulate_grad_batches"
    if isinstance(value, Mapping):
        pairs = []
        for epoch, factor in value.items():
            ok = isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0
            if not ok or isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
                raise bad(
                    name,
                    value,
                    "a schedule maps epochs (int ≥ 0) to factors (int ≥ 1). "
                    "Fix: Trainer(accumulate_grad_batches={0: 1, 4: 2}).",
                )
            pairs.append((int(epoch), int(factor)))
        if not pairs:
            raise bad(name, value, "an empty schedule. Fix: Trainer(accumulate_grad_batches=1).")
        schedule = tuple(sorted(pairs))
        first = schedule[0][1] if schedule[0][0] == 0 else 1
        return first, schedule
    found = check_int(name, value, minimum=1, meaning="batches per optimizer step")
    assert found is not None
    return found, ()


def check_val_check_interval(value: Any) -> int | float:
    name = "val_check_interval"
    if value is None:
        return 1.0
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise bad(name, value, f"a count of batches must be ≥ 1. Fix: Trainer({name}=100).")
        return int(value)
    if isinstance(value, float) and not math.isnan(value) and 0.0 < value <= 1.0:
        return value
    raise bad(
        name,
        value,
        f"pass an int (every n training batches) or a float in (0.0, 1.0] (a fraction of the "
        f"epoch); ddpkit has no time-based interval. Fix: Trainer({name}=0.25).",
    )


def check_gradient_clip(given: dict[str, Any]) -> tuple[float | None, str | None]:
    val, algo = given["gradient_clip_val"], given["gradient_clip_algorithm"]
    if val is not None:
        ok = isinstance(val, int | float) and not isinstance(val, bool) and math.isfinite(val)
        if not ok or val < 0:
            raise bad(
                "gradient_clip_val", val, "pass a number ≥ 0. Fix: Trainer(gradient_clip_val=1.0)."
            )
        val = float(val)
    if algo is not None:
        if not isinstance(algo, str) or algo.lower() not in ("norm", "value"):
            raise bad("gradient_clip_algorithm", algo, "choose 'norm' or 'value'.")
        algo = algo.lower()
    return val, algo


def check_logger(value: Any) -> Any:
    if value is None:
        return True
    if isinstance(value, bool):
        return value
    items = list(value) if isinstance(value, list | tuple) else [value]
    for item in items:
        if not (
            callable(getattr(item, "log_metrics", None))
            and callable(getattr(item, "log_hyperparams", None))
        ):
            raise bad(
                "logger",
                value,
                f"{type(item).__name__} is not a logger (no log_metrics / log_hyperparams). "
                f"Fix: Trainer(logger=CSVLogger('logs')) from ddpkit.loggers, or True / False.",
            )
    return items if isinstance(value, list | tuple) else value


def check_callbacks(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    items = list(value) if isinstance(value, list | tuple) else [value]
    for item in items:
        if not is_callback(item):
            raise bad(
                "callbacks",
                value,
                f"{type(item).__name__} is not a Callback. Fix: subclass "
                f"ddpkit.callbacks.Callback, e.g. Trainer(callbacks=[ModelCheckpoint()]).",
            )
    return tuple(items)
