"""The generated grid, EarlyStopping: a covering sample (twin_grid.covering) of its keywords —
the metric it watches (a validation value, a training step's, an epoch-end hook's), ``mode``,
``patience``, ``min_delta``, both thresholds, ``check_on_train_epoch_end``, ``verbose``,
``log_rank_zero_only`` — with validation every epoch or every 2nd and ``min_epochs``. Run by
Lightning 2.x and by ddpkit, every effect compared: the epochs trained, the rows, the weights,
the callback's state (``wait_count``, ``stopped_epoch``, ``best_score``, in the checkpoints too)
and its INFO lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twin_case import Case, Known, check, params
from twin_grid import covering, row_id

AXES: dict[str, list[Any]] = {
    "monitor": ["val_loss", "loss", "train_acc_epoch", "val_max", "train_epoch_end"],
    "mode": ["min", "max"],
    "patience": [3, 0, 1],
    "min_delta": [0.0, 0.05, -0.01],
    "stopping_threshold": [None, 0.3, 100.0],
    "divergence_threshold": [None, 1e-3, 1e3],
    "check_on_train_epoch_end": [None, True, False],
    "check_val_every_n_epoch": [1, 2],
    "verbose": [False, True],
    "log_rank_zero_only": [False, True],
    "min_epochs": [None, 2],
}
DEFAULTS = {name: values[0] for name, values in AXES.items()}
KEYWORDS = (
    "monitor", "mode", "patience", "min_delta", "stopping_threshold", "divergence_threshold",
    "check_on_train_epoch_end", "verbose", "log_rank_zero_only",
)  # fmt: skip


def refused(row: dict[str, Any]) -> bool:
    """Both refuse (strict) a metric that is not there at the first check: a validation value
    at the end of epoch 0 without a validation, or a training epoch value at epoch 0's
    validation, which comes before the training epoch's end (a later first validation finds
    epoch 0's). Unset, the check is at the
    training epoch's end when each epoch validates once (Lightning's ``setup``)."""
    at_train_end = row["check_on_train_epoch_end"]
    if at_train_end is None:
        at_train_end = row["check_val_every_n_epoch"] == 1
    if at_train_end:
        return row["monitor"].startswith("val_") and row["check_val_every_n_epoch"] != 1
    first_in_epoch_0 = row["check_val_every_n_epoch"] == 1
    return first_in_epoch_0 and row["monitor"] in ("train_acc_epoch", "train_epoch_end")


def case(row: dict[str, Any]) -> Case:
    trainer = {
        "max_epochs": 5,
        "limit_train_batches": 3,
        "log_every_n_steps": 1,
        "check_val_every_n_epoch": row["check_val_every_n_epoch"],
    }
    if row["min_epochs"] is not None:
        trainer["min_epochs"] = row["min_epochs"]
    stopper = {name: row[name] for name in KEYWORDS}
    spec = {"callbacks": [("EarlyStopping", stopper)]}
    if refused(row):
        return Case(trainer, ("fit",), spec, refused=("EarlyStopping", row["monitor"]))
    return Case(trainer, ("fit", "validate"), spec)


def cases() -> list[tuple[str, dict[str, Any], Case]]:
    return [(row_id(row, DEFAULTS), row, case(row)) for row in covering(AXES, seed=3)]


#: what ddpkit still does otherwise: (the rows it shows in, the difference)
KNOWN: Known = []


@pytest.mark.parametrize("the_case", params(cases(), KNOWN))
def test_early_stopping_as_in_lightning(tmp_path: Path, the_case: Case) -> None:
    check(the_case, tmp_path)
