"""The generated grid, loop keywords: a covering sample (twin_grid.covering) of the Trainer's loop
keywords run by Lightning 2.x and by ddpkit, every effect compared (twin_compare.compare). A
refusal of these keywords is compared in test_grid_refusals.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twin_case import Case, Known, check, params
from twin_grid import covering, row_id

AXES: dict[str, list[Any]] = {
    "max_epochs": [2, 1, 3],
    "max_steps": [-1, 3, 7],
    "min": [None, ("min_epochs", 2), ("min_steps", 5)],
    "early_stop": [False, True],
    "limit_train_batches": [1.0, 3, 0.5],
    "limit_val_batches": [1.0, 2, 0.5, 0],
    "val_check_interval": [1.0, 2, 0.5],
    "check_val_every_n_epoch": [1, 2, None],
    "num_sanity_val_steps": [2, 0, -1],
    "accumulate_grad_batches": [1, 2, 3],
    "log_every_n_steps": [50, 1, 2],
    "overfit_batches": [0, 2, 0.25],
    "reload_dataloaders_every_n_epochs": [0, 1, 2],
    "loaders": ["fit", "module"],
    "gradient_clip": [None, (0.5, "norm"), (0.1, "value")],
    "data": [(16, 4), (18, 4)],
    "calls": [("fit",), ("fit", "validate", "predict")],
}
DEFAULTS = {name: values[0] for name, values in AXES.items()}


def train_batches(row: dict[str, Any]) -> int:
    n, batch = row["data"]
    total = -(-n // batch)
    chosen = row["overfit_batches"] or row["limit_train_batches"]
    return chosen if isinstance(chosen, int) else int(total * chosen)


def val_batches(row: dict[str, Any]) -> Any:
    return row["overfit_batches"] or row["limit_val_batches"]  # overfit_batches sets both


def valid(row: dict[str, Any]) -> bool:
    """Leaves out what Lightning refuses (compared in test_grid_refusals.py): without epochs to
    count, validation every val_check_interval batches must be an int; with them, at most an
    epoch's batches. An early stop with min_epochs / min_steps: STOP_BEFORE_MIN."""
    if row["early_stop"] and row["min"]:
        return False
    interval, every = row["val_check_interval"], row["check_val_every_n_epoch"]
    if every is None:
        return isinstance(interval, int)
    return not isinstance(interval, int) or interval <= train_batches(row)


def case(row: dict[str, Any]) -> Case:
    trainer = {
        k: row[k]
        for k in AXES
        if k not in ("min", "early_stop", "loaders", "gradient_clip", "data", "calls")
    }
    if row["min"]:
        trainer[row["min"][0]] = row["min"][1]
    if row["gradient_clip"]:
        trainer["gradient_clip_val"], trainer["gradient_clip_algorithm"] = row["gradient_clip"]
    n, batch = row["data"]
    spec: dict[str, Any] = {"loader": {"n": n, "batch": batch}}
    if row["loaders"] == "module":
        spec["module"] = {"own_loaders": {"n": n, "batch": batch}}
    if row["early_stop"]:  # stops at its first check, unless min_* hold it back
        spec["callbacks"] = [
            ("EarlyStopping", {"monitor": "val_loss", "stopping_threshold": 100.0, "strict": False})
        ]
    # no validation batches: Lightning's validate starts no stage
    return Case(trainer, row["calls"], spec, skips=("validate",) if not val_batches(row) else ())


#: fast_dev_run overrides the others: a few rows of its own
FAST_DEV_RUN: list[dict[str, Any]] = [
    {**DEFAULTS, "fast_dev_run": True},
    {
        **DEFAULTS,
        "fast_dev_run": 2,
        "val_check_interval": 0.5,
        "calls": ("fit", "validate", "predict"),
    },
    {
        **DEFAULTS,
        "fast_dev_run": 3,
        "max_steps": 2,
        "accumulate_grad_batches": 2,
        "loaders": "module",
    },
]


#: an EarlyStopping that stops at its first check, with min_epochs / min_steps that may hold it
#: back: 4 batches an epoch, validation every epoch or every 2nd (the whole product)
STOP_BEFORE_MIN: list[dict[str, Any]] = [
    {
        **DEFAULTS,
        "max_epochs": 4,
        "early_stop": True,
        "min": m,
        "check_val_every_n_epoch": every,
        "accumulate_grad_batches": acc,
    }
    for m in (("min_epochs", 2), ("min_epochs", 3), ("min_steps", 5), ("min_steps", 9))
    for every in (1, 2)
    for acc in (1, 2)
]


def stopped_before_min(row: dict[str, Any]) -> bool:
    """A STOP_BEFORE_MIN row whose stop comes before its minimum is met."""
    if not (row["early_stop"] and row["min"]):
        return False
    epochs = row["check_val_every_n_epoch"]  # the epochs done at the first check
    steps = epochs * train_batches(row) // row["accumulate_grad_batches"]
    name, least = row["min"]
    return (epochs if name == "min_epochs" else steps) < least


def rows() -> list[dict[str, Any]]:
    return [*covering(AXES, valid=valid, seed=1), *FAST_DEV_RUN, *STOP_BEFORE_MIN]


def cases() -> list[tuple[str, dict[str, Any], Case]]:
    out = []
    for row in rows():
        made = case({k: v for k, v in row.items() if k != "fast_dev_run"})
        if "fast_dev_run" in row:
            made = Case({**made.trainer, "fast_dev_run": row["fast_dev_run"]}, made.calls,
                        made.spec, skips=made.skips)  # fmt: skip
        out.append((row_id(row, DEFAULTS), row, made))
    return out


#: what ddpkit still does otherwise (issue 33): (the rows it shows in, the difference)
KNOWN: Known = [
    (
        lambda row: (
            bool(row["min"])
            and (
                (row["min"][0] == "min_epochs" and row["min"][1] > row["max_epochs"])
                or (row["min"][0] == "min_steps" and 0 <= row["max_steps"] < row["min"][1])
            )
        ),
        "min_epochs > max_epochs (min_steps > max_steps): ddpkit refuses, Lightning trains",
    ),
]


@pytest.mark.parametrize("the_case", params(cases(), KNOWN))
def test_loop_keywords_as_in_lightning(tmp_path: Path, the_case: Case) -> None:
    check(the_case, tmp_path)


def test_the_stop_rows_ask_to_stop_before_their_minimum() -> None:
    """The STOP_BEFORE_MIN rows hold what they are for: most ask to stop before min_epochs /
    min_steps is met (Lightning then logs a row at each step and notes that training goes on,
    and with min_steps stops within the epoch once met), the others after."""
    before = [row for row in STOP_BEFORE_MIN if stopped_before_min(row)]
    assert 0 < len(before) < len(STOP_BEFORE_MIN)
