"""The generated grid, checkpoints: ModelCheckpoint's keywords — save_top_k, monitor and mode,
every_n_train_steps / every_n_epochs, save_last (True, "link"), filename templates,
auto_insert_metric_name, save_on_train_epoch_end — with mid-epoch validation and a resume, a
covering sample (twin_grid.covering) run by Lightning 2.x and by ddpkit: the files written, each
file's contents (twin_read.checkpoint_contents) and the callback's state. ModelCheckpoint's
refusals: test_grid_refusals.py; a resume from these files: test_same_as_lightning.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twin_case import Case, Known, check, params
from twin_grid import covering, row_id

AXES: dict[str, list[Any]] = {
    "save_top_k": [1, 2, -1, 0],
    "monitor": [None, "val_loss", "train_acc_epoch", "loss"],
    "mode": ["min", "max"],
    "every_n_train_steps": [None, 2, 3],
    "every_n_epochs": [None, 1, 2],
    "save_last": [None, True, "link", False],
    "filename": [None, "{epoch}-{val_loss:.2f}", "m-{step}", "{epoch:02d}-{train_acc_epoch:.3f}"],
    "auto_insert_metric_name": [True, False],
    "save_on_train_epoch_end": [None, True, False],
    "verbose": [False, True],
    "val_check_interval": [1.0, 2],
}
DEFAULTS = {name: values[0] for name, values in AXES.items()}


def valid(row: dict[str, Any]) -> bool:
    """What Lightning refuses is compared in test_grid_refusals.py: several best files without a
    metric to rank them; a step and an epoch interval together."""
    if row["monitor"] is None and row["save_top_k"] not in (-1, 0, 1):
        return False
    return not (row["every_n_train_steps"] and row["every_n_epochs"])


def saves_on_train_epoch_end(row: dict[str, Any]) -> bool:
    """Lightning's rule when save_on_train_epoch_end is not given."""
    given = row["save_on_train_epoch_end"]
    return given if given is not None else row["val_check_interval"] == 1.0


def refused(row: dict[str, Any]) -> bool:
    """Both refuse (MisconfigurationException) a top-k save at a validation's end that finds no
    train_acc_epoch: epoch 0's validations come before its training epoch ends, and after a
    validation ran a missing monitor is an error, not a warning. That is the first epoch-0
    validation's end with an epoch save due every epoch, or with a step save put off to it (a
    step due before the value exists is put off to the next validation's end)."""
    at_validation = not saves_on_train_epoch_end(row)
    due = row["every_n_train_steps"] or row["every_n_epochs"] in (None, 1)
    return row["monitor"] == "train_acc_epoch" and row["save_top_k"] != 0 and at_validation and due


def case(row: dict[str, Any]) -> Case:
    keywords = {k: row[k] for k in AXES if k != "val_check_interval" and row[k] is not None}
    trainer = {
        "max_epochs": 3,
        "limit_train_batches": 4,
        "val_check_interval": row["val_check_interval"],
    }
    spec = {"callbacks": [("ModelCheckpoint", keywords)]}
    if refused(row):
        return Case(trainer, ("fit",), spec, refused=("ModelCheckpoint", "train_acc_epoch"))
    return Case(trainer, ("fit",), spec)


def cases() -> list[tuple[str, dict[str, Any], Case]]:
    return [(row_id(row, DEFAULTS), row, case(row)) for row in covering(AXES, valid=valid, seed=4)]


#: what ddpkit still does otherwise (issue 33): (the rows it shows in, the difference)
KNOWN: Known = []


@pytest.mark.parametrize("the_case", params(cases(), KNOWN))
def test_checkpoints_as_in_lightning(tmp_path: Path, the_case: Case) -> None:
    check(the_case, tmp_path)
