"""The generated grid, LearningRateMonitor: its keywords (logging_interval, log_momentum,
log_weight_decay) × the optimizer (SGD with momentum, Adam's betas, Adagrad without either),
named and unnamed parameter groups, a scheduler of either interval (named or not) or none, and
the logger's row interval, a covering sample (twin_grid.covering) run by Lightning 2.x and by
ddpkit: the rates and momenta the callback keeps, the logger's rows, every metric a callback
reads. The scheduler grid (test_grid_schedulers.py) has a LearningRateMonitor on some rows too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twin_case import Case, Known, check, params
from twin_grid import covering, row_id

AXES: dict[str, list[Any]] = {
    "logging_interval": [None, "step", "epoch"],
    "log_momentum": [False, True],
    "log_weight_decay": [False, True],
    "optimizer": ["sgd", "adam", "adagrad"],
    "param_groups": [None, ("enc", "head"), ("enc", None), (None, None)],
    "scheduler": [None, "step", "onecycle", "exponential"],
    "interval": ["epoch", "step"],
    "name": [None, "sched"],
    "log_every_n_steps": [1, 2],
}
DEFAULTS = {name: values[0] for name, values in AXES.items()}


def valid(row: dict[str, Any]) -> bool:
    """A scheduler's interval and name mean something only with a scheduler; OneCycleLR cycles
    a momentum, which Adagrad has not (torch refuses it)."""
    if row["scheduler"] == "onecycle" and row["optimizer"] == "adagrad":
        return False
    return row["scheduler"] is not None or (row["interval"], row["name"]) == ("epoch", None)


def case(row: dict[str, Any]) -> Case:
    module: dict[str, Any] = {"optimizer": row["optimizer"], "param_groups": row["param_groups"]}
    if row["scheduler"]:
        config = {"kind": row["scheduler"], "interval": row["interval"]}
        module["schedulers"] = [config | ({"name": row["name"]} if row["name"] else {})]
    monitor = {k: row[k] for k in ("logging_interval", "log_momentum", "log_weight_decay")}
    trainer = {
        "max_epochs": 2,
        "limit_train_batches": 3,
        "log_every_n_steps": row["log_every_n_steps"],
    }
    return Case(
        trainer, ("fit",), {"module": module, "callbacks": [("LearningRateMonitor", monitor)]}
    )


def cases() -> list[tuple[str, dict[str, Any], Case]]:
    return [(row_id(row, DEFAULTS), row, case(row)) for row in covering(AXES, valid=valid, seed=5)]


#: what ddpkit still does otherwise: (the rows it shows in, the difference)
KNOWN: Known = []


@pytest.mark.parametrize("the_case", params(cases(), KNOWN))
def test_lr_monitor_as_in_lightning(tmp_path: Path, the_case: Case) -> None:
    check(the_case, tmp_path)
