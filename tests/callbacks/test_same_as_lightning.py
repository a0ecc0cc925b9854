"""What a Lightning user relies on is the same: one module, its data, callbacks and a recording
logger, run by real Lightning 2.x and by ddpkit (tests/callbacks/lightning_twin.py), and
everything either leaves behind compared — the metrics (callback, logged, progress bar), the
logger's rows and their steps, the trainer's attributes and state after the stage, what a
callback reads at the hooks, what validate / test return and print, the INFO lines, the
LearningRateMonitor's values; a call one refuses, the other refuses too. One process here; the
two-rank rows are in tests/integration/test_same_as_lightning_ddp.py. docs/training.md lists
what is compared."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from lightning_twin import data, pl, run

#: Lightning's own lines at every Trainer, which ddpkit does not print (docs/flags.md)
_NOT_COMPARED_INFO = ("GPU available", "TPU available", "💡 Tip")


def lr_monitor(**kwargs: Any) -> Any:
    return lambda lib: [lib.callbacks.LearningRateMonitor(**kwargs)]


def checkpoint(**kwargs: Any) -> Any:
    return lambda lib: [lib.callbacks.ModelCheckpoint(**kwargs)]


#: case: (Trainer keywords, the calls, run() keywords)
CASES: dict[str, tuple[dict[str, Any], list[str], dict[str, Any]]] = {
    "every stage": (
        {"max_epochs": 2, "limit_val_batches": 2},
        ["fit", "validate", "test", "predict"],
        {},
    ),
    "accumulation": ({"max_epochs": 1, "accumulate_grad_batches": 2}, ["fit"], {}),
    "max_steps mid-epoch": ({"max_steps": 3}, ["fit"], {}),
    "validation every 2 batches": ({"max_epochs": 1, "val_check_interval": 2}, ["fit"], {}),
    "validation every half epoch": ({"max_epochs": 1, "val_check_interval": 0.5}, ["fit"], {}),
    "val_check_interval past the epoch": (
        {"max_epochs": 1, "val_check_interval": 50},
        ["fit"],
        {},
    ),
    "validation every 2nd epoch": ({"max_epochs": 3, "check_val_every_n_epoch": 2}, ["fit"], {}),
    "a row every 2 steps": ({"max_epochs": 2, "log_every_n_steps": 2}, ["fit"], {}),
    "no training batches": ({"max_epochs": 1, "limit_train_batches": 0}, ["fit"], {}),
    "overfit_batches": ({"max_epochs": 2, "overfit_batches": 2}, ["fit"], {}),
    "the whole sanity check": ({"max_epochs": 1, "num_sanity_val_steps": -1}, ["fit"], {}),
    "results table": ({"max_epochs": 1}, ["test_verbose", "validate_verbose", "test"], {}),
    "fast_dev_run with a ModelCheckpoint": (
        {"fast_dev_run": True},
        ["fit", "test"],
        {"callbacks": checkpoint(monitor="val_loss")},
    ),
    "resume at max_epochs": (
        {"max_epochs": 2, "enable_checkpointing": True},
        ["fit", "resume"],
        {"callbacks": checkpoint(save_last=True)},
    ),
    "resume mid-training": (
        {"max_epochs": 3, "enable_checkpointing": True, "limit_train_batches": 2},
        ["fit_one_epoch", "resume", "test"],
        {"callbacks": checkpoint(save_last=True)},
    ),
    "early stopping on a validation metric": (
        {"max_epochs": 8, "limit_train_batches": 2},
        ["fit"],
        {
            "callbacks": lambda lib: [
                lib.callbacks.EarlyStopping("val_epoch_end", mode="max", stopping_threshold=3.0)
            ]
        },
    ),
    "early stopping on a train metric, patience": (
        {"max_epochs": 8, "limit_train_batches": 2},
        ["fit"],
        {
            "callbacks": lambda lib: [
                lib.callbacks.EarlyStopping("train_acc_epoch", patience=1, min_delta=0.5)
            ]
        },
    ),
    "checkpoints: top 2 of val_loss, last, every 2 steps": (
        {"max_epochs": 3, "limit_train_batches": 4},
        ["fit"],
        {
            "callbacks": checkpoint(
                monitor="val_loss", save_top_k=2, save_last=True, filename="{epoch}-{val_loss:.2f}"
            )
        },
    ),
    "checkpoints: every 3 steps, no monitor": (
        {"max_epochs": 2},
        ["fit"],
        {"callbacks": checkpoint(every_n_train_steps=3, save_top_k=-1)},
    ),
    "two optimizers": ({"max_epochs": 1}, ["fit"], {"module": {"optimizers": 2}}),
    # Epoch means weigh each batch by its size (Lightning infers it): the last batch is smaller.
    "a smaller last batch": (
        {"max_epochs": 2},
        ["fit", "validate", "test"],
        {"loaders": lambda: data(n=18, batch=4)},
    ),
    # An evaluation's step values go to the loggers, never to callback_metrics.
    "step values in validation": (
        {"max_epochs": 2},
        ["fit", "validate"],
        {
            "logs": [
                ("training_step", "loss", {}),
                ("validation_step", "val_step_only", {"on_step": True, "on_epoch": False}),
                ("validation_step", "val_both", {"on_step": True, "on_epoch": True}),
            ]
        },
    ),
    # The sanity check's loader draws its seed from torch's generator; Lightning sets the
    # generators back after it, so a shuffled training loader sees the same order.
    "the sanity check draws nothing from training": (
        {"max_epochs": 2, "num_sanity_val_steps": 2},
        ["fit"],
        {"loaders": lambda: data(shuffle=True)},
    ),
    "a step value in an epoch-end hook is refused": (
        {"max_epochs": 1},
        ["fit"],
        {"logs": [("on_train_epoch_end", "x", {"on_step": True})]},
    ),
    "a value logged neither on step nor on epoch is refused": (
        {"max_epochs": 1},
        ["fit"],
        {"logs": [("training_step", "x", {"on_step": False, "on_epoch": False})]},
    ),
    "lr: a step scheduler, momentum": (
        {"max_epochs": 2, "log_every_n_steps": 1},
        ["fit"],
        {
            "module": {"scheduler": {"interval": "step"}},
            "callbacks": lr_monitor(log_momentum=True, log_weight_decay=True),
        },
    ),
    "lr: an epoch scheduler, named groups": (
        {"max_epochs": 2, "log_every_n_steps": 2},
        ["fit"],
        {
            "module": {
                "scheduler": {"interval": "epoch", "name": "mine"},
                "param_groups": ["w", None],
                "optimizer": "adam",
            },
            "callbacks": lr_monitor(log_momentum=True),
        },
    ),
    "lr: no scheduler, two groups": (
        {"max_epochs": 2, "log_every_n_steps": 3},
        ["fit"],
        {"module": {"param_groups": [None, None]}, "callbacks": lr_monitor()},
    ),
    "lr: every epoch, no momentum to log": (
        {"max_epochs": 2},
        ["fit"],
        {
            "module": {"optimizer": "adagrad"},
            "callbacks": lr_monitor(logging_interval="epoch", log_momentum=True),
        },
    ),
    "lr: two groups of one name": (
        {"max_epochs": 1},
        ["fit"],
        {"module": {"param_groups": ["same", "same"]}, "callbacks": lr_monitor()},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_effects_as_lightning(tmp_path: Path, case: str) -> None:
    options, calls, extra = CASES[case]
    expected = asdict(run("lightning", tmp_path, calls, **extra, **options))
    found = asdict(run("ddpkit", tmp_path, calls, **extra, **options))
    expected["info"] = [m for m in expected["info"] if not m.startswith(_NOT_COMPARED_INFO)]
    expected["error"] = expected["error"] is not None  # both refuse (each its own exception)
    found["error"] = found["error"] is not None
    if case == "resume at max_epochs":  # no batch ran; Lightning restores its batch progress
        del expected["attributes"]["is_last_batch"], found["attributes"]["is_last_batch"]
    differ = {k: (expected[k], found[k]) for k in expected if expected[k] != found[k]}
    assert not differ, "\n".join(
        f"{k}:\n  Lightning {a}\n  ddpkit    {b}" for k, (a, b) in differ.items()
    )
    assert expected["seen"] or expected["error"], "the watching callback saw nothing"


def test_the_comparison_can_fail(tmp_path: Path) -> None:
    """The effects really differ when the runs do (the harness is not blind)."""
    a = asdict(run("lightning", tmp_path / "a", ["fit"], max_epochs=1))
    b = asdict(run("ddpkit", tmp_path / "b", ["fit"], max_epochs=2))
    assert a["rows"] != b["rows"] and a["attributes"] != b["attributes"]
    assert pl.__version__.startswith("2.")
