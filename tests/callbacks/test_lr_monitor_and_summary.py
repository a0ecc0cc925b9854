"""LearningRateMonitor's names and timing; ModelSummary's table; Timer (max_time)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import torch
from callback_models import BATCHES, Scripted, data, options

from ddpkit import MisconfigurationError, Trainer
from ddpkit.callbacks import LearningRateMonitor, ModelSummary, Timer, summarize


class TwoGroups(Scripted):
    def configure_optimizers(self) -> Any:
        adam = torch.optim.Adam(
            [
                {"params": [self.layer.weight], "name": "weights"},
                {"params": [self.layer.bias], "lr": 0.01},
            ],
            lr=0.1,
        )
        schedule = torch.optim.lr_scheduler.StepLR(adam, step_size=1, gamma=0.5)
        return [adam], [{"scheduler": schedule, "interval": "epoch"}]


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_names_and_values_follow_lightning(tmp_path: Path) -> None:
    monitor = LearningRateMonitor(log_momentum=True)
    trainer = Trainer(default_root_dir=tmp_path, callbacks=[monitor], **options(max_epochs=2))
    trainer.fit(TwoGroups(), data())
    # Two groups, one named; the scheduler's epoch interval: once per epoch, at its start.
    # (tests/callbacks/test_same_as_lightning.py runs such cases through Lightning itself.)
    assert list(monitor.lrs) == ["lr-Adam/weights", "lr-Adam/pg2"]
    assert monitor.lrs == {"lr-Adam/weights": [0.1, 0.05], "lr-Adam/pg2": [0.01, 0.005]}
    assert monitor.last_momentum_values == {
        "lr-Adam/weights-momentum": 0.9,
        "lr-Adam/pg2-momentum": 0.9,
    }
    logged = rows(tmp_path / "metrics.csv")
    assert [float(r["lr-Adam/weights"]) for r in logged if r.get("lr-Adam/weights")] == [0.1, 0.05]
    assert float(trainer.callback_metrics["lr-Adam/pg2"]) == pytest.approx(0.005)


def test_logging_interval_step_and_epoch(tmp_path: Path) -> None:
    per_epoch = LearningRateMonitor(logging_interval="epoch")
    Trainer(default_root_dir=tmp_path / "a", callbacks=[per_epoch], **options(max_epochs=3)).fit(
        Scripted(), data()
    )
    assert per_epoch.lrs == {"lr-SGD": [0.05] * 3}
    per_step = LearningRateMonitor(logging_interval="step")
    Trainer(
        default_root_dir=tmp_path / "b",
        callbacks=[per_step],
        **options(max_epochs=1, log_every_n_steps=2),
    ).fit(Scripted(), data())
    assert per_step.lrs == {"lr-SGD": [0.05] * (BATCHES // 2)}


def test_without_a_logger_it_says_so(tmp_path: Path) -> None:
    trainer = Trainer(
        default_root_dir=tmp_path,
        logger=False,
        callbacks=[LearningRateMonitor()],
        **options(max_epochs=1),
    )
    with pytest.raises(
        MisconfigurationError,
        match=r"LearningRateMonitor.*logger=False.*`Trainer` that has no logger.*Fix",
    ):
        trainer.fit(Scripted(), data())
    with pytest.raises(MisconfigurationError, match=r"logging_interval='hourly'"):
        LearningRateMonitor(logging_interval="hourly")


def test_the_summary_counts_the_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    model[2].weight.requires_grad_(False)
    table = summarize(model)
    assert "0 | 0    | Linear | 40" in table
    assert "2 | 2    | Linear | 18" in table
    assert "42         Trainable params" in table
    assert "16         Non-trainable params" in table
    assert "58         Total params" in table
    Trainer(
        default_root_dir=tmp_path, **{**options(max_epochs=1), "enable_model_summary": True}
    ).fit(Scripted(), data())
    err = capsys.readouterr().err
    assert "| Name  | Type   | Params | Mode" in err
    assert "3          Total params" in err
    with pytest.raises(MisconfigurationError, match=r"ModelSummary\(max_depth=-2\)"):
        ModelSummary(max_depth=-2)


def test_the_summary_is_a_default_callback_unless_turned_off() -> None:
    assert any(isinstance(cb, ModelSummary) for cb in Trainer().callbacks)
    assert not any(
        isinstance(cb, ModelSummary) for cb in Trainer(enable_model_summary=False).callbacks
    )
    own = ModelSummary(max_depth=-1)
    assert [cb for cb in Trainer(callbacks=[own]).callbacks if isinstance(cb, ModelSummary)] == [
        own
    ]


def test_max_time_stops_fit(tmp_path: Path) -> None:
    trainer = Trainer(default_root_dir=tmp_path, max_time={"microseconds": 1}, **options())
    assert trainer.max_epochs is None  # Lightning's until a fit resolves it
    timers = [cb for cb in trainer.callbacks if isinstance(cb, Timer)]
    assert len(timers) == 1
    trainer.fit(Scripted(), data())
    assert trainer.max_epochs == -1
    assert trainer.global_step == 1  # the time was up after the first step
    assert timers[0].time_elapsed() > 0
