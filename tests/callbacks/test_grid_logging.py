"""The generated grid, logging: ``self.log`` / ``self.log_dict`` in every hook where Lightning lets
a module log, with each ``on_step`` / ``on_epoch`` / ``prog_bar`` / ``logger`` / ``reduce_fx`` /
``sync_dist``, at several logging intervals — a covering sample (twin_grid.covering) run by
Lightning 2.x and by ddpkit beside the module's usual logs, every effect compared (the metrics,
every logger row and its step, what a callback reads at every hook). Where Lightning refuses an
option in a hook (its own table, ``_FxValidator``), both must refuse with its message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twin_case import Case, Known, check, params
from twin_grid import covering, row_id
from twin_module import LOG_HOOKS, LOGS

fx = pytest.importorskip("pytorch_lightning.trainer.connectors.logger_connector.fx_validator")

AXES: dict[str, list[Any]] = {
    "hook": ["training_step", "validation_step", "test_step", *LOG_HOOKS],
    "on_step": [None, True, False],
    "on_epoch": [None, True, False],
    "prog_bar": [False, True],
    "logger": [None, False],
    "reduce_fx": ["mean", "max", "sum"],
    "sync_dist": [False, True],
    "dict": [False, True],
    "log_every_n_steps": [50, 1, 3],
    "accumulate_grad_batches": [1, 2],
}
DEFAULTS = {name: values[0] for name, values in AXES.items()}


def refusal(row: dict[str, Any]) -> str | None:
    """What Lightning's table says of these levels in this hook: the fragment of its refusal."""
    allowed = fx._FxValidator.functions[row["hook"]]
    on_step = allowed["default_on_step"] if row["on_step"] is None else row["on_step"]
    on_epoch = allowed["default_on_epoch"] if row["on_epoch"] is None else row["on_epoch"]
    if on_step not in allowed["allowed_on_step"]:
        return f"`self.log(on_step={on_step})` inside `{row['hook']}`"
    if on_epoch not in allowed["allowed_on_epoch"]:
        return f"`self.log(on_epoch={on_epoch})` inside `{row['hook']}`"
    return None if on_step or on_epoch else "is not useful"


def case(row: dict[str, Any]) -> Case:
    options = {k: row[k] for k in ("on_step", "on_epoch", "logger") if row[k] is not None}
    options.update({k: row[k] for k in ("prog_bar", "reduce_fx", "sync_dist", "dict") if row[k]})
    trainer = {
        "max_epochs": 2,
        **{k: row[k] for k in ("log_every_n_steps", "accumulate_grad_batches")},
    }
    logs = [*LOGS, (row["hook"], "x", options)]
    return Case(trainer, ("fit", "validate_verbose", "test"), {"logs": logs}, refused=refusal(row))


def cases() -> list[tuple[str, dict[str, Any], Case]]:
    return [(row_id(row, DEFAULTS), row, case(row)) for row in covering(AXES, seed=3)]


#: what ddpkit still does otherwise (issue 33): (the rows it shows in, the difference)
KNOWN: Known = []


@pytest.mark.parametrize("the_case", params(cases(), KNOWN))
def test_logging_as_in_lightning(tmp_path: Path, the_case: Case) -> None:
    check(the_case, tmp_path)
