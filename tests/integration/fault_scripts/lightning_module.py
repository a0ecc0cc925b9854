"""The module of :mod:`restart_run` as a LightningModule (imported only with ``--lightning``)."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch
from restart_run import Steps, network
from torch import nn


class LitNet(Steps, pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = network()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.step_hook(self.current_epoch, batch_idx, self.global_rank)
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=0.01)
