"""What a Lightning user relies on is the same: one module, its data, callbacks and a recording
logger, run by real Lightning 2.x and by ddpkit (tests/callbacks/lightning_twin.py), and
everything either leaves behind compared — the metrics (callback, logged, progress bar), the
logger's rows and their steps, the trainer's attributes and state after the stage, what a
callback reads at the hooks, what validate / test return and print, the INFO lines, the
LearningRateMonitor's values; a call one refuses, the other refuses too. One process here; the
two-rank rows are in tests/integration/test_same_as_lightning_ddp.py. docs/training.md lists
what is compared."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from lightning_twin import pl, run
from twin_case import Case, check
from twin_compare import compare


def lr_monitor(**kwargs: Any) -> Any:
    return lambda lib: [lib.callbacks.LearningRateMonitor(**kwargs)]


def checkpoint(**kwargs: Any) -> Any:
    return lambda lib: [lib.callbacks.ModelCheckpoint(**kwargs)]


def timer(**kwargs: Any) -> Any:
    return lambda lib: [lib.callbacks.Timer(**kwargs)]


def logs(*entries: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"logs": list(entries)}


#: hand-picked cases (the generated grid is in test_grid_*.py)
CASES: dict[str, Case] = {
    "every stage": Case(
        {"max_epochs": 2, "limit_val_batches": 2}, ("fit", "validate", "test", "predict")
    ),
    "accumulation": Case({"max_epochs": 1, "accumulate_grad_batches": 2}),
    "max_steps mid-epoch": Case({"max_steps": 3}),
    "validation every 2 batches": Case({"max_epochs": 1, "val_check_interval": 2}),
    "validation every half epoch": Case({"max_epochs": 1, "val_check_interval": 0.5}),
    "val_check_interval past the epoch": Case(
        {"max_epochs": 1, "val_check_interval": 50}, refused="val_check_interval"
    ),
    "validation every 2nd epoch": Case({"max_epochs": 3, "check_val_every_n_epoch": 2}),
    "a row every 2 steps": Case({"max_epochs": 2, "log_every_n_steps": 2}),
    "no training batches": Case({"max_epochs": 1, "limit_train_batches": 0}),
    "overfit_batches": Case({"max_epochs": 2, "overfit_batches": 2}),
    # Lightning's INFO line for each limit given as 1 (one batch) or 1.0 (all of them)
    "limits given as 1.0": Case(
        {
            "max_epochs": 1,
            "limit_train_batches": 1.0,
            "limit_val_batches": 1.0,
            "limit_test_batches": 1.0,
            "val_check_interval": 1.0,
        },
        ("fit", "test"),
    ),
    "limits given as 1": Case(
        {
            "max_epochs": 1,
            "limit_train_batches": 1,
            "limit_val_batches": 1,
            "limit_predict_batches": 1,
            "val_check_interval": 1,
        },
        ("fit", "predict"),
    ),
    "overfit_batches given as 1": Case({"max_epochs": 1, "overfit_batches": 1}),
    "the whole sanity check": Case({"max_epochs": 1, "num_sanity_val_steps": -1}),
    "results table": Case({"max_epochs": 1}, ("test_verbose", "validate_verbose", "test")),
    "fast_dev_run with a ModelCheckpoint": Case(
        {"fast_dev_run": True}, ("fit", "test"), {"callbacks": checkpoint(monitor="val_loss")}
    ),
    "resume at max_epochs": Case(
        {"max_epochs": 2, "enable_checkpointing": True},
        ("fit", "resume"),
        {"callbacks": checkpoint(save_last=True)},
    ),
    "resume mid-training": Case(
        {"max_epochs": 3, "enable_checkpointing": True, "limit_train_batches": 2},
        ("fit_one_epoch", "resume", "test"),
        {"callbacks": checkpoint(save_last=True)},
    ),
    # a step save at an epoch's last batch waits for the validation that follows, whose loader
    # Lightning counts when the fit starts (no sanity check to count it), but not for one that
    # does not follow (every 2nd epoch)
    "step saves at the last batch, no sanity check": Case(
        {"max_epochs": 2, "limit_train_batches": 4, "num_sanity_val_steps": 0},
        spec={"callbacks": checkpoint(monitor="loss", every_n_train_steps=4, save_top_k=2)},
    ),
    "step saves at the last batch, validation every 2nd epoch": Case(
        {"max_epochs": 3, "limit_train_batches": 4, "check_val_every_n_epoch": 2},
        spec={
            "callbacks": checkpoint(
                monitor="loss", every_n_train_steps=2, save_top_k=-1, save_last=True
            )
        },
    ),
    "save_on_exception": Case(
        {"max_epochs": 3, "limit_train_batches": 4},
        spec={
            "callbacks": checkpoint(save_on_exception=True, save_last=True),
            "module": {"fail_at_step": 6},
        },
        refused="the twin fails at step 6",
    ),
    "save_on_exception after a save at that step": Case(
        {"max_epochs": 3, "limit_train_batches": 4},
        spec={
            "callbacks": checkpoint(save_on_exception=True, every_n_train_steps=1),
            "module": {"fail_at_step": 5},
        },
        refused="the twin fails at step 5",
    ),
    "early stopping on a validation metric": Case(
        {"max_epochs": 8, "limit_train_batches": 2},
        spec={
            "callbacks": lambda lib: [
                lib.callbacks.EarlyStopping("val_epoch_end", mode="max", stopping_threshold=3.0)
            ]
        },
    ),
    "early stopping on a train metric, patience": Case(
        {"max_epochs": 8, "limit_train_batches": 2},
        spec={
            "callbacks": lambda lib: [
                lib.callbacks.EarlyStopping("train_acc_epoch", patience=1, min_delta=0.5)
            ]
        },
    ),
    "checkpoints: top 2 of val_loss, last, every 2 steps": Case(
        {"max_epochs": 3, "limit_train_batches": 4},
        spec={
            "callbacks": checkpoint(
                monitor="val_loss", save_top_k=2, save_last=True, filename="{epoch}-{val_loss:.2f}"
            )
        },
    ),
    "checkpoints: every 3 steps, no monitor": Case(
        {"max_epochs": 2}, spec={"callbacks": checkpoint(every_n_train_steps=3, save_top_k=-1)}
    ),
    "a checkpoint's contents": Case(
        {"max_epochs": 2, "limit_train_batches": 3},
        spec={
            "callbacks": checkpoint(monitor="val_loss", save_top_k=2),
            "module": {"scheduler": {"interval": "step"}, "optimizer": "adam"},
        },
    ),
    "a checkpoint's hyperparameters": Case(
        {"max_epochs": 1},
        spec={"callbacks": checkpoint(), "module": {"hparams": {"width": 3, "name": "a"}}},
    ),
    "two optimizers": Case(
        {"max_epochs": 1},
        spec={"module": {"optimizers": 2}},
        refused="automatic_optimization = False",
    ),
    # Epoch means weigh each batch by its size (Lightning infers it): the last batch is smaller.
    "a smaller last batch": Case(
        {"max_epochs": 2}, ("fit", "validate", "test"), {"loader": {"n": 18, "batch": 4}}
    ),
    # An evaluation's step values go to the loggers, never to callback_metrics.
    "step values in validation": Case(
        {"max_epochs": 2},
        ("fit", "validate"),
        logs(
            ("training_step", "loss", {}),
            ("validation_step", "val_step_only", {"on_step": True, "on_epoch": False}),
            ("validation_step", "val_both", {"on_step": True, "on_epoch": True}),
        ),
    ),
    # The sanity check's loader draws its seed from torch's generator; Lightning sets the
    # generators back after it, so a shuffled training loader sees the same order.
    "the sanity check draws nothing from training": Case(
        {"max_epochs": 2, "num_sanity_val_steps": 2}, spec={"loader": {"shuffle": True}}
    ),
    "a step value in an epoch-end hook is refused": Case(
        {"max_epochs": 1},
        spec=logs(("on_train_epoch_end", "x", {"on_step": True})),
        refused="`self.log(on_step=True)` inside `on_train_epoch_end`",
    ),
    "a value logged neither on step nor on epoch is refused": Case(
        {"max_epochs": 1},
        spec=logs(("training_step", "x", {"on_step": False, "on_epoch": False})),
        refused="is not useful",
    ),
    "lr: a step scheduler, momentum": Case(
        {"max_epochs": 2, "log_every_n_steps": 1},
        spec={
            "module": {"scheduler": {"interval": "step"}},
            "callbacks": lr_monitor(log_momentum=True, log_weight_decay=True),
        },
    ),
    "lr: an epoch scheduler, named groups": Case(
        {"max_epochs": 2, "log_every_n_steps": 2},
        spec={
            "module": {
                "scheduler": {"interval": "epoch", "name": "mine"},
                "param_groups": ["w", None],
                "optimizer": "adam",
            },
            "callbacks": lr_monitor(log_momentum=True),
        },
    ),
    "lr: no scheduler, two groups": Case(
        {"max_epochs": 2, "log_every_n_steps": 3},
        spec={"module": {"param_groups": [None, None]}, "callbacks": lr_monitor()},
    ),
    "lr: every epoch, no momentum to log": Case(
        {"max_epochs": 2},
        spec={
            "module": {"optimizer": "adagrad"},
            "callbacks": lr_monitor(logging_interval="epoch", log_momentum=True),
        },
    ),
    # A duration of zero is up at on_fit_start (Lightning 2.x's first check): no step. No
    # max_epochs given: a Timer leaves the epochs unlimited. (With min_epochs / min_steps the
    # stop waits: test_grid_loops.py's known difference of a stop before the minimum.)
    "a Timer of zero": Case({}, spec={"callbacks": timer(duration={"seconds": 0})}),
    "a Timer of zero, by epoch": Case(
        {}, spec={"callbacks": timer(duration="00:00:00:00", interval="epoch")}
    ),
    "max_time of zero": Case({"max_time": timedelta(0)}),
    # The user's Timer is kept, max_time ignored, with Lightning's INFO line. (No checkpoint:
    # its Timer state holds each run's own seconds.)
    "max_time beside a Timer": Case(
        {"max_time": {"hours": 1}, "max_steps": 3, "enable_checkpointing": False},
        spec={"callbacks": timer(duration={"hours": 2}, interval="epoch")},
    ),
    "lr: two groups of one name": Case(
        {"max_epochs": 1},
        spec={"module": {"param_groups": ["same", "same"]}, "callbacks": lr_monitor()},
        refused="cannot have multiple parameter groups with identical `name` values",
    ),
    # a callback's setup of the second stage reads the first stage's metrics, as in Lightning
    "fit then test: setup reads the fit's metrics": Case({"max_epochs": 1}, ("fit", "test")),
    # Lightning's logged / progress-bar metrics hold an evaluation's step values from its batch
    # end, and the sanity check's values until it ends (no logger row of them)
    "evaluation step values": Case(
        {"max_epochs": 1},
        spec=logs(("validation_step", "v", {"on_step": True, "prog_bar": True})),
    ),
}

#: the cases that compare a difference left out of the others (twin_compare.APART), one each
KNOWN: dict[str, tuple[str, Case]] = {}
for _name, (_, _case) in KNOWN.items():
    CASES[f"known: {_name}"] = Case(
        _case.trainer, _case.calls, _case.spec, _case.refused, known=(_name,)
    )

#: case -> the difference from Lightning it still shows (issue 33): xfail(strict=True)
DIFFERENT = {
    **{f"known: {name}": reason for name, (reason, _) in KNOWN.items()},
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=DIFFERENT[name])])
        if name in DIFFERENT
        else name
        for name in sorted(CASES)
    ],
)
def test_the_same_effects_as_lightning(tmp_path: Path, case: str) -> None:
    check(CASES[case], tmp_path)


def test_the_comparison_can_fail(tmp_path: Path) -> None:
    """The effects really differ when the runs do (the harness is not blind)."""
    a = run("lightning", tmp_path / "a", ["fit"], max_epochs=1)
    b = run("ddpkit", tmp_path / "b", ["fit"], max_epochs=2)
    differ = "\n".join(compare(a, b))
    assert "rows:" in differ and "attributes:" in differ and "weights:" in differ
    assert pl.__version__.startswith("2.")
