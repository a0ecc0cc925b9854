"""Tiny modules and data for the trainer's unit tests (one process, real Trainer)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit


def regression_data(n: int = 32, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    y = x @ torch.tensor([[2.0], [-1.0]]) + 0.5
    return TensorDataset(x, y)


def loader(n: int = 32, batch_size: int = 4, **kwargs: Any) -> DataLoader[Any]:
    return DataLoader(regression_data(n), batch_size=batch_size, **kwargs)


class Recorder(ddpkit.Module):
    """Linear regression that records every hook call and step; logs train and val loss."""

    def __init__(self, lr: float = 0.1, optimizer: str = "sgd") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.Linear(2, 1)
        self.lr = lr
        self.optimizer = optimizer
        self.calls: list[str] = []
        self.train_batches: list[tuple[int, int]] = []  # (epoch, batch_idx)
        self.val_batches = 0
        self.seen_dtypes: list[torch.dtype] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def on_fit_start(self) -> None:
        self.calls.append("on_fit_start")

    def on_fit_end(self) -> None:
        self.calls.append("on_fit_end")

    def on_train_epoch_start(self) -> None:
        self.calls.append("on_train_epoch_start")

    def on_train_epoch_end(self) -> None:
        self.calls.append("on_train_epoch_end")

    def on_validation_epoch_end(self) -> None:
        self.calls.append("on_validation_epoch_end")

    def on_test_epoch_end(self) -> None:
        self.calls.append("on_test_epoch_end")

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        out = self(x)
        self.seen_dtypes.append(out.dtype)
        self.train_batches.append((self.trainer.current_epoch, batch_idx))
        loss = F.mse_loss(out.float(), y.float())
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.val_batches += 1
        self.log("val_loss", F.mse_loss(self(x).float(), y.float()))

    def test_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", F.mse_loss(self(x).float(), y.float()))

    def predict_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self(batch[0])

    def configure_optimizers(self) -> Any:
        if self.optimizer == "adam":
            return torch.optim.Adam(self.parameters(), lr=self.lr)
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def quiet(**kwargs: Any) -> dict[str, Any]:
    """Trainer options for unit tests: no progress bar, no model summary, no sanity check, a
    step row every step (a short fit would otherwise warn that it logged none), plus
    ``kwargs``."""
    return {
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        "log_every_n_steps": 1,
        **kwargs,
    }
