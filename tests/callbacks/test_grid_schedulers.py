"""The generated grid, learning-rate schedulers: every ``interval`` × ``frequency`` × ``monitor``
of a ReduceLROnPlateau (a training and a validation metric), every scheduler kind × ``interval`` ×
``frequency``, each with ``strict``, a second scheduler, validation every epoch or every 2nd, a
LearningRateMonitor and the optimizer rotated over the rows (``DDPKIT_FULL_GRID=1``: every
combination of those too). Run by Lightning 2.x and by ddpkit, every effect compared — the
learning rates at every hook, the weights, the schedulers' states in the checkpoints."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from twin_case import Case, Known, check, params
from twin_grid import FULL, row_id

LIMIT_TRAIN_BATCHES = 3

#: the whole product of these ...
PLATEAU = {"interval": ["step", "epoch"], "frequency": [1, 2, 3], "monitor": ["loss", "val_loss"]}
OTHERS = {
    "kind": ["step", "step2", "exponential", "cosine", "onecycle"],
    "interval": ["step", "epoch"],
    "frequency": [1, 2, 3],
}
#: ... each with one combination of these, in turn (all of them with DDPKIT_FULL_GRID=1)
ROTATED = {
    "strict": [True, False],
    "check_val_every_n_epoch": [1, 2],
    "second": [
        None,
        {"kind": "step2", "interval": "epoch"},
        {"kind": "exponential", "interval": "step", "frequency": 2},
    ],
    "lr_monitor": [None, "step", "epoch"],
    "optimizer": ["sgd", "adam"],
}
DEFAULTS = {
    "kind": "plateau",
    "strict": True,
    "check_val_every_n_epoch": 1,
    "second": None,
    "lr_monitor": None,
    "optimizer": "sgd",
}


def _rows(axes: dict[str, list[Any]], base: dict[str, Any], offset: int) -> list[dict[str, Any]]:
    rotated = list(itertools.product(*ROTATED.values()))
    out = []
    for i, values in enumerate(itertools.product(*axes.values())):
        row = {**base, **dict(zip(axes, values))}
        picks = rotated if FULL else [rotated[(i * 7 + offset) % len(rotated)]]
        out += [{**row, **dict(zip(ROTATED, pick))} for pick in picks]
    return out


def rows() -> list[dict[str, Any]]:
    return [*_rows(PLATEAU, {"kind": "plateau"}, 0), *_rows(OTHERS, {"monitor": None}, 3)]


def plateau_refused(row: dict[str, Any]) -> bool:
    """Lightning refuses (strict) a ReduceLROnPlateau step whose metric is not there yet: the
    validation metric before the first validation (a step scheduler's update after a batch
    comes after that batch's validation)."""
    if row["kind"] != "plateau" or not row["strict"] or row["monitor"] != "val_loss":
        return False
    if row["interval"] == "step":  # first update at batch `frequency`; validation after batch 3
        return row["frequency"] < LIMIT_TRAIN_BATCHES or row["check_val_every_n_epoch"] > 1
    return row["frequency"] < row["check_val_every_n_epoch"]  # first update at epoch `frequency`


def case(row: dict[str, Any]) -> Case:
    first = {k: row[k] for k in ("kind", "interval", "frequency", "strict")}
    if row["monitor"]:
        first["monitor"] = row["monitor"]
    spec: dict[str, Any] = {
        "module": {
            "schedulers": [first, *([row["second"]] if row["second"] else [])],
            "optimizer": row["optimizer"],
        }
    }
    if row["lr_monitor"]:
        spec["callbacks"] = [
            (
                "LearningRateMonitor",
                {
                    "logging_interval": row["lr_monitor"] if row["lr_monitor"] != "step" else None,
                    "log_momentum": True,
                },
            )
        ]
    trainer = {
        "max_epochs": 3,
        "limit_train_batches": LIMIT_TRAIN_BATCHES,
        "log_every_n_steps": 1,
        "check_val_every_n_epoch": row["check_val_every_n_epoch"],
    }
    refused = ("ReduceLROnPlateau", "val_loss") if plateau_refused(row) else None
    return Case(trainer, ("fit", "validate"), spec, refused=refused)


def cases() -> list[tuple[str, dict[str, Any], Case]]:
    return [(row_id(row, DEFAULTS), row, case(row)) for row in rows()]


#: what ddpkit still does otherwise (issue 33): (the rows it shows in, the difference)
KNOWN: Known = []


@pytest.mark.parametrize("the_case", params(cases(), KNOWN))
def test_schedulers_as_in_lightning(tmp_path: Path, the_case: Case) -> None:
    check(the_case, tmp_path)
