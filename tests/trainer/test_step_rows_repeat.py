"""A step row holds the latest value of every name logged ``on_step`` so far in its epoch, as
Lightning 2.x's results collection does: a value logged at one batch is repeated in the rows of
the later steps of that epoch (training and evaluation alike) and gone in the next epoch. The
same module run by real Lightning 2.x and by ddpkit hands its loggers the same rows."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from test_logged_step import recorder
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit

pl = pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")


def module(base: type) -> Any:
    class Sometimes(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = F.mse_loss(self.layer(batch[0]), batch[1])
            self.log("loss", loss)
            if batch_idx == 1 and self.current_epoch == 0:
                self.log("once", 5.0 + batch_idx)  # a step before a row that is not written
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            if batch_idx == 0:
                self.log("v_first", 1.0 + self.current_epoch, on_step=True, on_epoch=False)
            self.log("v", float(batch_idx), on_step=True, on_epoch=False)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Sometimes()


def rows(kind: str, tmp_path: Path) -> list[tuple[dict[str, float], int | None]]:
    lib: Any = pl if kind == "lightning" else ddpkit
    base = pl.LightningModule if kind == "lightning" else ddpkit.Module
    logger = recorder(pl.loggers.Logger if kind == "lightning" else ddpkit.loggers.Logger)
    x = torch.randn(12, 2, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about workers and srun
        trainer = lib.Trainer(
            accelerator="cpu", devices=1, max_epochs=2, logger=logger, log_every_n_steps=2,
            limit_train_batches=6, limit_val_batches=3, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
            default_root_dir=tmp_path / kind,
        )  # fmt: skip
        trainer.fit(module(base), data, data)
    return [({k: v for k, v in m.items() if k != "loss"}, step) for m, step in logger.rows]


def test_a_step_value_is_repeated_until_its_epoch_ends_as_in_lightning(tmp_path: Path) -> None:
    ours = rows("ddpkit", tmp_path)
    assert ours == rows("lightning", tmp_path)
    # what the comparison holds: "once" logged at batch 1 is in the rows of steps 1, 3 and 5 of
    # epoch 0 only, and "v_first" in every validation row of its epoch
    assert [step for metrics, step in ours if "once" in metrics] == [1, 3, 5]
    assert [m["v_first"] for m, _ in ours if "v_first" in m] == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
