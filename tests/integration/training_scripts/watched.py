"""A module whose validation score is scripted per rank and epoch, and a callback that records
every hook it sees — for the 2-rank callback tests.

Rank 0's ``val_loss`` is best at epoch 1 and worsens after it; rank 1's stops improving at
epoch 2. Not synced, so the ranks disagree: EarlyStopping(patience=1) must stop both at epoch 2
(rank 1 asks, every rank follows), and ModelCheckpoint must keep rank zero's best (epoch 1).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit.callbacks import Callback

SCORES = {0: [1.0, 0.6, 0.7, 0.8, 0.9, 1.0], 1: [1.0, 0.9, 0.95, 0.5, 0.4, 0.3]}
BEST_EPOCH, STOP_EPOCH = 1, 2
N, BATCH = 32, 4  # 2 ranks: 4 batches per rank and epoch


def dataset(n: int = N) -> TensorDataset:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, 2, generator=g)
    return TensorDataset(x, x @ torch.tensor([[1.5], [-0.5]]))


def loader(n: int = N, batch: int = BATCH) -> DataLoader[Any]:
    return DataLoader(dataset(n), batch_size=batch)


class Watched(ddpkit.Module):
    def __init__(
        self, lr: float = 0.05, width: int = 1, scores: dict[int, list[float]] | None = None
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        torch.manual_seed(0)
        self.layer = nn.Linear(2, width)
        self.epoch_weights: dict[int, dict[str, torch.Tensor]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x).sum(1, keepdim=True)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        scores = self.hparams.scores or SCORES
        self.log("val_loss", torch.tensor(scores[self.global_rank][self.current_epoch]))

    def test_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", F.mse_loss(self(x), y), sync_dist=True)

    def predict_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self(batch[0])

    def on_train_epoch_end(self) -> None:
        self.epoch_weights[self.current_epoch] = {
            k: v.detach().clone() for k, v in self.state_dict().items()
        }

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def _hook_names() -> list[str]:
    return sorted(n for n in dir(Callback) if n.startswith("on_") or n in ("setup", "teardown"))


class Recording(Callback):
    """Records ``(hook, global_step)``; writes them to ``<folder>/hooks-rank<R>.json`` at each
    teardown (under spawn the ranks are other processes)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = str(folder)
        self.calls: list[str] = []

    def _write(self, trainer: Any) -> None:
        path = Path(self.folder) / f"hooks-rank{trainer.global_rank}.json"
        tmp = path.with_suffix(".part")
        tmp.write_text(json.dumps(self.calls))
        os.replace(tmp, path)


def _recorder(name: str) -> Any:
    def hook(self: Recording, trainer: Any, *args: Any, **kwargs: Any) -> None:
        self.calls.append(name)
        if name == "teardown":
            self._write(trainer)

    return hook


for _name in _hook_names():
    setattr(Recording, _name, _recorder(_name))
