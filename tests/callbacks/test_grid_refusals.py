"""What Lightning 2.x refuses, and what it runs, at the edges of each axis of the grid: a value out
of range for every loop keyword, a scheduler config, ModelCheckpoint and EarlyStopping, run by
Lightning and by ddpkit. A refusal must be the same: at the same call, of the type
twin_compare.REFUSALS maps Lightning's to, with both messages naming the fragments below (the
keyword and its value, where both say them); what Lightning runs, ddpkit must run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twin_case import Case, Known, check, params


def _mc(**keywords: Any) -> dict[str, Any]:
    return {"callbacks": [("ModelCheckpoint", keywords)]}


def _sched(**config: Any) -> dict[str, Any]:
    return {"module": {"schedulers": [config]}}


#: name: (Trainer keywords, run() keywords, the fragments of the refusal or None)
EDGES: dict[str, tuple[dict[str, Any], dict[str, Any], Any]] = {
    "val_check_interval a fraction without epochs": (
        {"check_val_every_n_epoch": None, "val_check_interval": 0.5},
        {},
        "check_val_every_n_epoch=None",
    ),
    "val_check_interval above 1.0": (
        {"val_check_interval": 1.5},
        {},
        ("val_check_interval", "1.5"),
    ),
    "val_check_interval past the epoch": ({"val_check_interval": 5}, {}, "val_check_interval"),
    "val_check_interval past the epoch, no epochs": (
        {"val_check_interval": 5, "check_val_every_n_epoch": None},
        {},
        None,
    ),
    "limit_val_batches above 1.0": ({"limit_val_batches": 1.5}, {}, ("limit_val_batches", "1.5")),
    "limit_train_batches under one batch": (
        {"limit_train_batches": 0.01},
        {},
        ("limit_train_batches", "0.01"),
    ),
    "limit_train_batches past the loader": ({"limit_train_batches": 50}, {}, None),
    "overfit_batches negative": ({"overfit_batches": -1}, {}, ("overfit_batches", "-1")),
    "overfit_batches past the loader": ({"overfit_batches": 50}, {}, None),
    "fast_dev_run negative": ({"fast_dev_run": -1}, {}, "fast_dev_run=-1"),
    "gradient_clip_algorithm unknown": (
        {"gradient_clip_val": 1.0, "gradient_clip_algorithm": "foo"},
        {},
        ("gradient_clip_algorithm", "foo"),
    ),
    "gradient_clip_val 0": ({"gradient_clip_val": 0.0}, {}, None),
    "accumulate_grad_batches 0": ({"accumulate_grad_batches": 0}, {}, "accumulate_grad_batches"),
    "accumulate_grad_batches past the epoch": ({"accumulate_grad_batches": 9}, {}, None),
    "num_sanity_val_steps -2": ({"num_sanity_val_steps": -2}, {}, None),
    "log_every_n_steps -1": ({"log_every_n_steps": -1}, {}, None),
    "log_every_n_steps 0": ({"log_every_n_steps": 0}, {}, None),
    "max_epochs -1 with max_steps": ({"max_epochs": -1, "max_steps": 5}, {}, None),
    "max_epochs 0": ({"max_epochs": 0}, {}, None),
    "max_steps 0": ({"max_steps": 0}, {}, None),
    "check_val_every_n_epoch past max_epochs": ({"check_val_every_n_epoch": 5}, {}, None),
    "ReduceLROnPlateau without monitor": (
        {},
        _sched(kind="plateau"),
        ("ReduceLROnPlateau", "monitor"),
    ),
    "ReduceLROnPlateau on a metric never logged": (
        {},
        _sched(kind="plateau", monitor="nope"),
        ("ReduceLROnPlateau", "nope"),
    ),
    "ReduceLROnPlateau on a metric never logged, not strict": (
        {},
        _sched(kind="plateau", monitor="nope", strict=False),
        None,
    ),
    "scheduler interval unknown": (
        {},
        _sched(kind="step", interval="bogus"),
        ("interval", "bogus"),
    ),
    "scheduler frequency 0": ({}, _sched(kind="step", frequency=0), "frequency"),
    "ModelCheckpoint top 2 without monitor": (
        {},
        _mc(save_top_k=2),
        "ModelCheckpoint(save_top_k=2, monitor=None) is not a valid configuration",
    ),
    "ModelCheckpoint step and epoch intervals": (
        {},
        _mc(every_n_train_steps=2, every_n_epochs=2),
        "should be mutually exclusive",
    ),
    "ModelCheckpoint save_top_k -2": ({}, _mc(save_top_k=-2), ("save_top_k", "Must be >= -1")),
    "ModelCheckpoint every_n_train_steps -1": (
        {},
        _mc(every_n_train_steps=-1),
        ("every_n_train_steps", "Must be >= 0"),
    ),
    "ModelCheckpoint mode unknown": (
        {},
        _mc(monitor="val_loss", mode="avg"),
        "`mode` can be min, max",
    ),
    "ModelCheckpoint on a metric never logged": (
        {},
        _mc(monitor="nope"),
        ("ModelCheckpoint(monitor='nope')", "could not find"),
    ),
    "ModelCheckpoint on a metric never logged, no validation": (
        {"limit_val_batches": 0},
        _mc(monitor="nope", save_last=True),
        None,
    ),
    "ModelCheckpoint every_n_epochs 0": ({}, _mc(every_n_epochs=0, save_last=True), None),
    "EarlyStopping mode unknown": (
        {},
        {"callbacks": [("EarlyStopping", {"monitor": "val_loss", "mode": "avg"})]},
        "`mode` can be min, max",
    ),
    "EarlyStopping on a metric never logged": (
        {},
        {"callbacks": [("EarlyStopping", {"monitor": "nope"})]},
        "nope",
    ),
    "EarlyStopping on a metric never logged, not strict": (
        {},
        {"callbacks": [("EarlyStopping", {"monitor": "nope", "strict": False})]},
        None,
    ),
}


def cases() -> list[tuple[str, dict[str, Any], Case]]:
    out = []
    for name, (trainer, spec, refused) in EDGES.items():
        out.append(
            (
                name,
                {"name": name},
                Case({"max_epochs": 2, **trainer}, ("fit",), spec, refused=refused),
            )
        )
    return out


def _named(*names: str) -> Any:
    return lambda row: row["name"] in names


#: what ddpkit still does otherwise (issue 33): (the rows it shows in, the difference)
KNOWN: Known = [
    (
        _named("num_sanity_val_steps -2", "log_every_n_steps -1"),
        "num_sanity_val_steps=-2 / log_every_n_steps=-1: Lightning runs them (as -1 / no step rows), ddpkit refuses",
    ),
    (
        _named("accumulate_grad_batches 0", "scheduler frequency 0"),
        "accumulate_grad_batches=0 / a scheduler frequency of 0: Lightning fails mid-fit with a raw ZeroDivisionError; ddpkit refuses before (MisconfigurationError) — ddpkit's way is the better one: a Differences row",
    ),
]


@pytest.mark.parametrize("the_case", params(cases(), KNOWN))
def test_edges_as_in_lightning(tmp_path: Path, the_case: Case) -> None:
    check(the_case, tmp_path)
