"""EarlyStopping: patience, min_delta, mode, thresholds, non-finite values, min_epochs, and its
state in checkpoints (one process; tests/integration has 2 ranks)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from callback_models import BATCHES, Scripted, data, options

from ddpkit import MisconfigurationError, Trainer
from ddpkit.callbacks import EarlyStopping, EarlyStoppingReason


def fit(
    tmp_path: Path, scores: list[float], stopper: EarlyStopping, **kwargs: Any
) -> tuple[Trainer, Scripted]:
    model = Scripted(scores)
    trainer = Trainer(
        default_root_dir=tmp_path, callbacks=[stopper], **options(max_epochs=len(scores), **kwargs)
    )
    trainer.fit(model, data(), data())
    return trainer, model


def test_stops_after_patience_checks_without_improvement(tmp_path: Path) -> None:
    stopper = EarlyStopping("val_loss", patience=2)
    trainer, model = fit(tmp_path, [1.0, 0.5, 0.6, 0.7, 0.1, 0.1], stopper)
    assert stopper.stopped_epoch == 3  # epochs 2 and 3 did not beat 0.5
    assert trainer.current_epoch == 4  # epochs 0-3 ran
    assert trainer.global_step == 4 * BATCHES
    assert sorted(model.weights) == [0, 1, 2, 3]
    assert trainer.should_stop
    assert stopper.stopping_reason is EarlyStoppingReason.PATIENCE_EXHAUSTED
    assert stopper.wait_count == 2
    assert float(stopper.best_score) == 0.5
    assert trainer.early_stopping_callback is stopper


def test_no_stop_while_it_improves(tmp_path: Path) -> None:
    stopper = EarlyStopping("val_loss", patience=1)
    trainer, _ = fit(tmp_path, [0.9, 0.8, 0.7, 0.6], stopper)
    assert (stopper.stopped_epoch, trainer.current_epoch) == (0, 4)
    assert stopper.stopping_reason is EarlyStoppingReason.NOT_STOPPED


def test_min_delta_and_mode(tmp_path: Path) -> None:
    # Improvements smaller than min_delta count as none.
    small = EarlyStopping("val_loss", patience=1, min_delta=0.1)
    fit(tmp_path / "a", [1.0, 0.95, 0.5, 0.5], small)
    assert small.stopped_epoch == 1
    # mode="max": rising is better.
    rising = EarlyStopping("val_loss", patience=1, mode="max")
    fit(tmp_path / "b", [0.1, 0.2, 0.15, 0.3], rising)
    assert rising.stopped_epoch == 2


@pytest.mark.parametrize(
    ("kwargs", "scores", "epoch", "reason"),
    [
        ({"check_finite": True}, [1.0, math.nan, 0.5], 1, EarlyStoppingReason.NON_FINITE_METRIC),
        ({"stopping_threshold": 0.3}, [1.0, 0.2, 0.1], 1, EarlyStoppingReason.STOPPING_THRESHOLD),
        (
            {"divergence_threshold": 5.0},
            [1.0, 6.0, 0.1],
            1,
            EarlyStoppingReason.DIVERGENCE_THRESHOLD,
        ),
    ],
)
def test_the_other_reasons_to_stop(
    tmp_path: Path, kwargs: dict[str, Any], scores: list[float], epoch: int, reason: Any
) -> None:
    stopper = EarlyStopping("val_loss", patience=10, **kwargs)
    fit(tmp_path, scores, stopper)
    assert (stopper.stopped_epoch, stopper.stopping_reason) == (epoch, reason)
    assert stopper.stopping_reason_message


def test_min_epochs_holds_the_stop_back(tmp_path: Path) -> None:
    stopper = EarlyStopping("val_loss", patience=1)
    trainer, _ = fit(tmp_path, [1.0, 2.0, 3.0, 4.0, 5.0], stopper, min_epochs=3)
    assert trainer.current_epoch == 3  # the stop asked at epoch 1 waits for the third epoch


def test_a_metric_never_logged_is_an_error_unless_not_strict(tmp_path: Path) -> None:
    with pytest.raises(
        MisconfigurationError, match=r"EarlyStopping\(monitor='val_acc'\).*'val_loss'"
    ):
        fit(tmp_path / "a", [1.0, 1.0], EarlyStopping("val_acc"))
    trainer, _ = fit(tmp_path / "b", [1.0, 1.0, 1.0], EarlyStopping("val_acc", strict=False))
    assert trainer.current_epoch == 3


def test_a_train_metric_is_checked_at_the_end_of_each_training_epoch(tmp_path: Path) -> None:
    stopper = EarlyStopping("train_loss_epoch", patience=0, mode="max")
    trainer = Trainer(default_root_dir=tmp_path, callbacks=[stopper], **options(max_epochs=5))
    trainer.fit(Scripted(), data())  # no validation at all
    assert (stopper.stopped_epoch, trainer.current_epoch) == (1, 2)  # the loss fell in epoch 1


def test_its_state_is_saved_and_restored(tmp_path: Path) -> None:
    stopper = EarlyStopping("val_loss", patience=3)
    trainer, _ = fit(tmp_path, [1.0, 0.5, 0.7], stopper)
    path = tmp_path / "mid.ckpt"
    trainer.save_checkpoint(path)
    again = EarlyStopping("val_loss", patience=3)
    second = Trainer(default_root_dir=tmp_path / "b", callbacks=[again], **options(max_epochs=4))
    second.fit(Scripted([1.0, 0.5, 0.7, 0.8]), data(), data(), ckpt_path=path)
    assert float(again.best_score) == 0.5
    assert again.wait_count == 2  # one from the first run, one from epoch 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"monitor": "val_loss", "mode": "lowest"},
            r"\(mode='lowest'\): `mode` can be .* got lowest",
        ),
        ({"monitor": ""}, r"EarlyStopping\(monitor=''\)"),
        ({"monitor": "val_loss", "patience": -1}, r"EarlyStopping\(patience=-1\)"),
        # issue 22: a TypeError after the first epoch before
        ({"monitor": "v", "stopping_threshold": "x"}, r"\(stopping_threshold='x'\): pass a num"),
        ({"monitor": "v", "divergence_threshold": [1]}, r"\(divergence_threshold=\[1\]\): pass"),
        ({"monitor": "v", "min_delta": True}, r"\(min_delta=True\): pass a number"),
        ({"monitor": "v", "check_on_train_epoch_end": "x"}, r"check_on_train_epoch_end='x'"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(MisconfigurationError, match=message):
        EarlyStopping(**kwargs)


def test_testing_from_the_best_checkpoint_leaves_the_callbacks_as_fit_left_them(
    tmp_path: Path,
) -> None:
    """As in Lightning, only a fit restores callback state from a checkpoint."""
    stopper = EarlyStopping("val_loss", patience=1)
    trainer, _ = fit(tmp_path, [1.0, 0.5, 0.7, 0.8], stopper)
    assert stopper.stopped_epoch == 2
    trainer.test(dataloaders=data(), ckpt_path="best")  # the best: epoch 1, before the stop
    assert (stopper.stopped_epoch, stopper.wait_count) == (2, 1)
