"""The generated grid, loaders and samplers in one process: shuffle, drop_last, a smaller last
batch, a sampler or batch sampler of the user's, several epochs, with accumulation, a limit, the
sanity check and every stage — a covering sample (twin_grid.covering) run by Lightning 2.x and by
ddpkit, every effect compared (the batches' order shows in the weights, the losses and the
predictions). Two ranks: tests/integration/test_same_as_lightning_ddp.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twin_case import Case, Known, check, params
from twin_grid import covering, row_id

AXES: dict[str, list[Any]] = {
    "shuffle": [False, True],
    "drop_last": [False, True],
    "n": [16, 18, 17],
    "batch": [4, 5, 3],
    "sampler": [None, "random", "every_other", "batch_sampler"],
    "max_epochs": [2, 1, 3],
    "accumulate_grad_batches": [1, 2],
    "limit_train_batches": [1.0, 0.5, 2],
    "num_sanity_val_steps": [2, 0],
    "calls": [("fit",), ("fit", "test", "predict"), ("fit", "validate", "predict")],
}
DEFAULTS = {name: values[0] for name, values in AXES.items()}


def valid(row: dict[str, Any]) -> bool:
    # a sampler of the user's and shuffle=True: torch's DataLoader refuses them together
    return not (row["shuffle"] and row["sampler"])


def case(row: dict[str, Any]) -> Case:
    loader = {k: row[k] for k in ("n", "batch", "shuffle", "drop_last", "sampler")}
    trainer = {
        k: row[k]
        for k in (
            "max_epochs",
            "accumulate_grad_batches",
            "limit_train_batches",
            "num_sanity_val_steps",
        )
    }
    return Case(trainer, row["calls"], {"loader": loader})


def cases() -> list[tuple[str, dict[str, Any], Case]]:
    return [(row_id(row, DEFAULTS), row, case(row)) for row in covering(AXES, valid=valid, seed=2)]


#: what ddpkit still does otherwise (issue 33): (the rows it shows in, the difference)
KNOWN: Known = []


@pytest.mark.parametrize("the_case", params(cases(), KNOWN))
def test_loaders_as_in_lightning(tmp_path: Path, the_case: Case) -> None:
    check(the_case, tmp_path)
