"""Modules and data for the callback tests (one process, real Trainer)."""

from __future__ import annotations

from typing import Any

import torch
import torch._dynamo
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit

BATCHES = 4  # data(): 16 samples, batch size 4


def data(n: int = 16, seed: int = 0) -> DataLoader[Any]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    return DataLoader(TensorDataset(x, x @ torch.tensor([[2.0], [-1.0]])), batch_size=4)


class Scripted(ddpkit.Module):
    """Linear regression whose validation reports ``val_loss = scores[epoch]`` (so the best epoch
    is known) and keeps a copy of its weights at the end of every epoch."""

    def __init__(self, scores: list[float] | None = None, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        torch.manual_seed(0)
        self.layer = nn.Linear(2, 1)
        self.weights: dict[int, dict[str, torch.Tensor]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        scores = self.hparams.scores
        x, y = batch
        real = F.mse_loss(self(x), y)
        value = scores[self.current_epoch] if scores else real
        self.log("val_loss", torch.as_tensor(value, dtype=torch.float32))
        self.log("val_real", real)

    def test_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", F.mse_loss(self(x), y))

    def on_train_epoch_end(self) -> None:
        self.weights[self.current_epoch] = {
            k: v.detach().clone() for k, v in self.state_dict().items()
        }

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def options(**kwargs: Any) -> dict[str, Any]:
    return {
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        "log_every_n_steps": 1,
        **kwargs,
    }
