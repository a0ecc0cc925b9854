"""A real pytorch_lightning.LightningModule that only uses hooks trains under ddpkit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ddpkit import Trainer

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")


class LitRegressor(pl.LightningModule):  # type: ignore[misc, name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(4, 1)
        self.losses: list[float] = []

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.losses.append(float(loss.detach()))
        return loss

    def train_dataloader(self) -> DataLoader[tuple[torch.Tensor, ...]]:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(128, 4, generator=g)
        return DataLoader(
            TensorDataset(x, x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])), batch_size=16
        )

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def test_lightning_module_trains_with_hooks_only(tmp_path: Path) -> None:
    model = LitRegressor()
    trainer = Trainer(max_epochs=4, default_root_dir=tmp_path, enable_progress_bar=False)
    trainer.fit(model)
    assert trainer.global_step == 4 * 8
    assert len(model.losses) == 32
    assert model.losses[-1] < model.losses[0] / 4
    assert Path(trainer.checkpoint_path or "").exists()
