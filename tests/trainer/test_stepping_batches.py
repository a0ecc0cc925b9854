"""``trainer.estimated_stepping_batches`` in ``configure_optimizers`` (what a ``OneCycleLR``
needs): the same number as Lightning's for the same loader and keywords, and the loop trains on
the loader made to count it."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import MisconfigurationError

pl = pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")


def module(base: type) -> Any:
    class Counting(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)
            self.estimated: list[Any] = []
            self.loaders_made = 0

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return F.mse_loss(self.layer(batch[0]), batch[1])

        def train_dataloader(self) -> DataLoader[Any]:
            self.loaders_made += 1
            x = torch.randn(22, 2, generator=torch.Generator().manual_seed(0))
            return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)

        def configure_optimizers(self) -> Any:
            self.estimated.append(self.trainer.estimated_stepping_batches)
            return torch.optim.SGD(self.parameters(), lr=0.1)

        def on_train_end(self) -> None:
            self.estimated.append(self.trainer.estimated_stepping_batches)

    return Counting()


def estimate(kind: str, tmp_path: Path, **keywords: Any) -> tuple[list[Any], int, int]:
    lib: Any = pl if kind == "lightning" else ddpkit
    trainer = lib.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path / kind,
        **keywords,
    )  # fmt: skip
    model = module(pl.LightningModule if kind == "lightning" else ddpkit.Module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about workers
        trainer.fit(model)
    return model.estimated, model.loaders_made, trainer.global_step


@pytest.mark.parametrize(
    "keywords",
    [
        {"max_epochs": 3},
        {"max_epochs": 3, "accumulate_grad_batches": 2},
        {"max_epochs": 3, "max_steps": 7},
        {"max_epochs": 2, "limit_train_batches": 3},
        {"max_epochs": 2, "limit_train_batches": 0.5},
    ],
    ids=repr,
)
def test_the_estimate_is_lightnings(keywords: dict[str, Any], tmp_path: Path) -> None:
    expected = estimate("lightning", tmp_path, **keywords)
    found = estimate("ddpkit", tmp_path, **keywords)
    assert found == expected
    assert found[1] == 1  # the loader made to count is the one the loop trains on


def test_before_any_fit_it_says_where_to_read_it() -> None:
    with pytest.raises(MisconfigurationError, match="read it in configure_optimizers"):
        _ = ddpkit.Trainer(accelerator="cpu", devices=1, logger=False).estimated_stepping_batches
