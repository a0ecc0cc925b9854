"""A real pytorch_lightning.LightningModule is refused by ddpkit.Trainer before any rank starts,
with ddpkit.lightning.Trainer named as the fix — never trained hooks-only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ddpkit import MisconfigurationError, Trainer
from ddpkit.utilities._procs import children

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")


class LitRegressor(pl.LightningModule):  # type: ignore[misc, name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(4, 1)
        self.steps = 0

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        self.steps += 1
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Subclassed(LitRegressor):
    """Lightning's class further up the MRO still counts."""


def loader() -> DataLoader[tuple[torch.Tensor, ...]]:
    x = torch.randn(16, 4)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)


@pytest.mark.parametrize("stage", ["fit", "validate", "test", "predict"])
@pytest.mark.parametrize("cls", [LitRegressor, Subclassed])
def test_every_stage_refuses_a_lightning_module_naming_the_lightning_trainer(
    tmp_path: Path, stage: str, cls: type
) -> None:
    model = cls()
    trainer = Trainer(default_root_dir=tmp_path, enable_progress_bar=False)
    with pytest.raises(
        MisconfigurationError,
        match=rf"Trainer\.{stage}\(model=<{cls.__name__}>\): .*LightningModule.*ddpkit\.lightning import Trainer",
    ):
        getattr(trainer, stage)(model, loader())
    assert model.steps == 0
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing was written


def test_the_refusal_comes_before_any_rank_starts(tmp_path: Path) -> None:
    """With two spawned ranks configured, the error is raised in this process: no child
    process was started."""
    trainer = Trainer(
        accelerator="cpu", devices=2, strategy="ddp_spawn", default_root_dir=tmp_path, logger=False
    )
    before = {p.pid for p in children(os.getpid())}
    with pytest.raises(MisconfigurationError, match=r"ddpkit\.lightning"):
        trainer.fit(LitRegressor(), loader())
    assert {p.pid for p in children(os.getpid())} == before
