"""A fit resumed from a checkpoint written within an epoch goes on from the next batch: the same
epochs, batch indices and steps as Lightning's resume, and — where Lightning feeds the epoch's
first batches again — the batches an uninterrupted run would have trained on, so it ends on an
uninterrupted run's weights."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
import ddpkit.callbacks

pl = pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")


def module(base: type) -> Any:
    class Traced(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = torch.nn.Linear(4, 1)
            self.trace: list[tuple[int, int, int, float]] = []

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            self.trace.append((self.current_epoch, batch_idx, self.global_step, float(x[0, 0])))
            return F.mse_loss(self.layer(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.02, momentum=0.9)

    return Traced()


def data() -> DataLoader[Any]:
    x = torch.randn(40, 4, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)  # 5 batches


def fit(kind: str, root: Path, ckpt_path: Any = None, **keywords: Any) -> tuple[Any, Any]:
    lib: Any = pl if kind == "lightning" else ddpkit
    trainer = lib.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=root, **keywords,
    )  # fmt: skip
    model = module(pl.LightningModule if kind == "lightning" else ddpkit.Module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about workers
        trainer.fit(model, data(), ckpt_path=ckpt_path)
    return trainer, model


def resumed(kind: str, root: Path) -> tuple[Any, Any]:
    """Three steps with a checkpoint every three steps (within epoch 0), then a new Trainer's
    fit of two epochs from that checkpoint."""
    lib: Any = pl if kind == "lightning" else ddpkit
    every = lib.callbacks.ModelCheckpoint(
        dirpath=root / "ckpt", every_n_train_steps=3, save_top_k=-1, filename="{epoch}-{step}"
    )
    fit(kind, root, max_epochs=2, max_steps=3, callbacks=[every])
    return fit(kind, root, ckpt_path=root / "ckpt" / "epoch=0-step=3.ckpt", max_epochs=2,
               enable_checkpointing=False)  # fmt: skip


def test_a_mid_epoch_resume_goes_on_from_the_next_batch(tmp_path: Path) -> None:
    trainer, model = resumed("ddpkit", tmp_path / "ddpkit")
    whole_trainer, whole = fit("ddpkit", tmp_path / "whole", max_epochs=2,
                               enable_checkpointing=False)  # fmt: skip
    # Lightning's count of the resumed run: epoch 0's batches 3 and 4, then epoch 1.
    lightning_trainer, lightning = resumed("lightning", tmp_path / "lightning")
    assert [t[:3] for t in model.trace] == [t[:3] for t in lightning.trace]
    assert trainer.global_step == lightning_trainer.global_step == 10
    # ... on the batches an uninterrupted run trains on there, ending on its weights.
    assert model.trace == whole.trace[3:]
    assert whole_trainer.global_step == trainer.global_step
    for name, value in whole.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], value, rtol=0, atol=0, msg=name)
