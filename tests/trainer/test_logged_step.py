"""The rows a logger gets, by Lightning 2.x's rules, with the same module run by real Lightning
2.x and by ddpkit: a value logged as ``"step"`` is the row's step, not a metric
(``LoggerConnector.log_metrics``); a step row holds the latest value of every name logged
``on_step`` so far in its epoch (Lightning's results collection), training and evaluation
alike."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit

pl = pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")


def recorder(base: type) -> Any:
    class Recorder(base):  # type: ignore[misc, valid-type]
        name = "rows"
        version = 0

        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[dict[str, float], int | None]] = []

        def log_metrics(self, metrics: Any, step: int | None = None) -> None:
            self.rows.append(({k: round(float(v), 4) for k, v in metrics.items()}, step))

        def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
            pass

    return Recorder()


def module(base: type, sometimes: bool = False) -> Any:
    """``sometimes``: values logged at some batches only (a training value at one batch of the
    first epoch, a validation value at each validation's first batch)."""

    class Stepping(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = F.mse_loss(self.layer(batch[0]), batch[1])
            self.log("loss", loss)
            if not sometimes:
                self.log("step", 10.0 * (self.current_epoch + 1) + batch_idx)
            elif batch_idx == 1 and self.current_epoch == 0:
                self.log("once", 5.0 + batch_idx)  # a step before a row that is not written
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            if not sometimes:
                self.log("v", F.mse_loss(self.layer(batch[0]), batch[1]))
                return
            if batch_idx == 0:
                self.log("v_first", 1.0 + self.current_epoch, on_step=True, on_epoch=False)
            self.log("v", float(batch_idx), on_step=True, on_epoch=False)

        def on_validation_epoch_end(self) -> None:
            if not sometimes:
                self.log("step", 100.0 + self.current_epoch)  # the epoch's row, no "epoch"

        def on_train_epoch_end(self) -> None:
            if not sometimes:
                self.log("epoch", 7.0)  # a logged "epoch" stays (Lightning adds one if missing)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Stepping()


def rows(
    kind: str, tmp_path: Path, sometimes: bool = False, **options: Any
) -> tuple[list[tuple[dict[str, float], int | None]], Any]:
    lib: Any = pl if kind == "lightning" else ddpkit
    base = pl.LightningModule if kind == "lightning" else ddpkit.Module
    logger = recorder(pl.loggers.Logger if kind == "lightning" else ddpkit.loggers.Logger)
    x = torch.randn(12, 2, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=options.pop("batch"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about workers and srun
        trainer = lib.Trainer(
            accelerator="cpu", devices=1, max_epochs=2, logger=logger,
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            num_sanity_val_steps=0, default_root_dir=tmp_path / kind, **options,
        )  # fmt: skip
        trainer.fit(module(base, sometimes), data, data)
    return logger.rows, trainer


def test_a_logged_step_is_the_rows_step_as_in_lightning(tmp_path: Path) -> None:
    """Before, ddpkit logged "step" as a metric, at the trainer's step, with "epoch" added."""
    options = {"batch": 4, "log_every_n_steps": 1, "limit_train_batches": 2, "limit_val_batches": 2}
    ours, trainer = rows("ddpkit", tmp_path, **options)
    theirs, their_trainer = rows("lightning", tmp_path, **options)
    shape = [(sorted(metrics), step) for metrics, step in ours]
    assert shape == [(sorted(metrics), step) for metrics, step in theirs]
    assert shape == [
        (["loss"], 10),
        (["loss"], 11),
        (["v"], 100),
        (["epoch"], 1),  # no "step" logged: at the batches that stepped
        (["loss"], 20),
        (["loss"], 21),
        (["v"], 101),
        (["epoch"], 3),
    ]
    assert [metrics["epoch"] for metrics, _ in ours if "epoch" in metrics] == [7.0, 7.0]
    # trainer.logged_metrics keeps it: only the loggers' rows take it out
    assert "step" in trainer.logged_metrics and "step" in their_trainer.logged_metrics


def test_a_step_value_is_repeated_until_its_epoch_ends_as_in_lightning(tmp_path: Path) -> None:
    """Before, ddpkit's step row held only what that step logged."""
    options = {"batch": 2, "log_every_n_steps": 2, "limit_train_batches": 6, "limit_val_batches": 3}
    ours = rows("ddpkit", tmp_path, True, **options)[0]
    theirs = rows("lightning", tmp_path, True, **options)[0]
    assert ours == theirs
    # what the comparison holds: "once" logged at batch 1 is in the rows of steps 1, 3 and 5 of
    # epoch 0 only, and "v_first" in every validation row of its epoch
    assert [step for metrics, step in ours if "once" in metrics] == [1, 3, 5]
    assert [m["v_first"] for m, _ in ours if "v_first" in m] == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
