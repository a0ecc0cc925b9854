"""A module that records the batches each rank sees and logs ``sync_dist`` values that differ
per rank, with loaders whose batch samplers are the user's (tests/integration/
test_same_as_lightning_ddp.py). Importable by spawned ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

import ddpkit

N = 40


class Indices(torch.utils.data.Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return N

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor(float(index))


class Threes(BatchSampler):
    """A batch sampler subclass of the user's."""


def loaders() -> tuple[DataLoader[Any], DataLoader[Any]]:
    data = Indices()
    train = DataLoader(data, batch_sampler=BatchSampler(RandomSampler(data), 4, False))
    val = DataLoader(data, batch_sampler=Threes(SequentialSampler(data), 3, False))
    return train, val


class Recorder(ddpkit.Module):
    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder
        self.layer = nn.Linear(1, 1)
        self.seen: dict[str, list[list[int]]] = {"train": [], "val": []}

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        if self.current_epoch == 0:
            self.seen["train"].append([int(v) for v in batch])
        rank = float(self.global_rank)
        self.log("rank_mean", rank, sync_dist=True)
        self.log("rank_sum", rank + 1, sync_dist=True, reduce_fx="sum")
        self.log("rank_max", rank, sync_dist=True, reduce_fx="max")
        # weighted: rank 0 logs 1.0 for batches of 1, rank 1 logs 4.0 for batches of 3
        self.log("weighted", 1.0 + 3 * rank, sync_dist=True, on_step=False, on_epoch=True,
                 batch_size=1 + 2 * self.global_rank)  # fmt: skip
        return self.layer(batch.view(-1, 1)).mean() * 0

    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        if not self.trainer.sanity_checking and self.current_epoch == 0:
            self.seen["val"].append([int(v) for v in batch])

    def on_fit_end(self) -> None:
        metrics = {k: float(v) for k, v in self.trainer.callback_metrics.items()}
        out = {"seen": self.seen, "metrics": metrics}
        (Path(self.folder) / f"rank{self.global_rank}.json").write_text(json.dumps(out))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)
