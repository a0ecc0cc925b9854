"""A value logged as ``"step"`` is the row's step, not a metric (Lightning 2.x's
``LoggerConnector.log_metrics``): the same module, logging ``step`` in a training step and at an
epoch's end, run by real Lightning 2.x and by ddpkit, hands its loggers the same rows."""

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


def module(base: type) -> Any:
    class Stepping(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = F.mse_loss(self.layer(batch[0]), batch[1])
            self.log("loss", loss)
            self.log("step", 10.0 * (self.current_epoch + 1) + batch_idx)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("v", F.mse_loss(self.layer(batch[0]), batch[1]))

        def on_validation_epoch_end(self) -> None:
            self.log("step", 100.0 + self.current_epoch)  # the epoch's row, with no "epoch"

        def on_train_epoch_end(self) -> None:
            self.log("epoch", 7.0)  # a logged "epoch" stays (Lightning adds one if missing)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Stepping()


def rows(kind: str, tmp_path: Path) -> tuple[list[tuple[dict[str, float], int | None]], Any]:
    lib: Any = pl if kind == "lightning" else ddpkit
    base = pl.LightningModule if kind == "lightning" else ddpkit.Module
    logger = recorder(pl.loggers.Logger if kind == "lightning" else ddpkit.loggers.Logger)
    x = torch.randn(8, 2, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about workers and srun
        trainer = lib.Trainer(
            accelerator="cpu", devices=1, max_epochs=2, logger=logger, log_every_n_steps=1,
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            num_sanity_val_steps=0, default_root_dir=tmp_path / kind,
        )  # fmt: skip
        trainer.fit(module(base), data, data)
    return logger.rows, trainer


def test_a_logged_step_is_the_rows_step_as_in_lightning(tmp_path: Path) -> None:
    """Before, ddpkit logged "step" as a metric, at the trainer's step, with "epoch" added."""
    ours, trainer = rows("ddpkit", tmp_path)
    theirs, their_trainer = rows("lightning", tmp_path)
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
