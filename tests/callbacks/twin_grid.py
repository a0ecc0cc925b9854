"""The generated grid of the Lightning twin comparison (tests/callbacks/test_grid_*.py): axes of
values and a covering sample of their product, deterministic.

:func:`covering` picks rows of the product such that every pair of values of any two axes (every
triple with ``DDPKIT_FULL_GRID=1``) is in some row: what an interaction of two settings does
shows up without running the whole product. A ``valid`` predicate leaves out rows a family
compares elsewhere (a refusal has cases of its own, with its message).
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable
from typing import Any

#: ``DDPKIT_FULL_GRID=1``: every triple of values, where the default suite covers every pair
FULL = os.environ.get("DDPKIT_FULL_GRID") == "1"
STRENGTH = 3 if FULL else 2

Row = dict[str, Any]


def _tuples(axes: dict[str, list[Any]], strength: int) -> set[tuple[tuple[str, int], ...]]:
    names = list(axes)
    out = set()
    for chosen in itertools.combinations(names, min(strength, len(names))):
        for values in itertools.product(*(range(len(axes[n])) for n in chosen)):
            out.add(tuple(zip(chosen, values)))
    return out


def _covered(row: dict[str, int], strength: int) -> set[tuple[tuple[str, int], ...]]:
    names = list(row)
    return {
        tuple((n, row[n]) for n in chosen)
        for chosen in itertools.combinations(names, min(strength, len(names)))
    }


def covering(
    axes: dict[str, list[Any]],
    *,
    strength: int = STRENGTH,
    seed: int = 0,
    valid: Callable[[Row], bool] = lambda row: True,
    candidates: int = 40,
) -> list[Row]:
    """Rows (axis name -> value) that hold every ``strength``-tuple of values that some valid row
    holds: greedy, as AETG does — each new row the best of ``candidates`` random valid rows
    grown value by value towards the tuples still missing. The same axes and seed give the same
    rows."""
    rng = random.Random(seed)
    missing = _tuples(axes, strength)
    rows: list[Row] = []
    names = list(axes)
    misses = 0
    while missing and misses < 3 * candidates:
        best: dict[str, int] | None = None
        best_gain = 0
        for _ in range(candidates):
            row: dict[str, int] = {}
            for name in rng.sample(names, len(names)):
                options = list(range(len(axes[name])))
                rng.shuffle(options)
                row[name] = max(
                    options,
                    key=lambda v: sum(
                        t in missing
                        for t in _covered({**row, name: v}, strength)
                        if any(n == name for n, _ in t)
                    ),
                )
            row = {n: row[n] for n in names}
            if not valid({n: axes[n][v] for n, v in row.items()}):
                continue
            gain = len(_covered(row, strength) & missing)
            if gain > best_gain:
                best, best_gain = row, gain
        if best is None:
            misses += candidates  # the tuples left may be in no valid row
            continue
        missing -= _covered(best, strength)
        rows.append({n: axes[n][v] for n, v in best.items()})
    return rows


def row_id(row: Row, defaults: Row) -> str:
    """The row's values that are not the family's defaults, as ``name=value`` pairs."""
    shown = [f"{k}={_short(v)}" for k, v in row.items() if defaults.get(k, object()) != v]
    return ",".join(shown) or "defaults"


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_short(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_short(v) for v in value) + "]"
    return str(value)
