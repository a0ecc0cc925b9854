"""Checkpoints both ways, against real Lightning 2.x: a ddpkit checkpoint holds what Lightning's
own holds at the same point of the same fit (its ``loops`` progress, ``epoch``, ``global_step``,
``pytorch-lightning_version``), Lightning loads it (``load_from_checkpoint``) and resumes it
(``fit(ckpt_path=...)``) to the weights and step it reaches from its own, and ddpkit resumes a
Lightning checkpoint as it resumes its own."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
import ddpkit.callbacks
from ddpkit.trainer._lightning_loops import LIGHTNING_FORMAT

pl = pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")

#: name: (ModelCheckpoint keywords, Trainer keywords, validation) — each point where a fit
#: writes a checkpoint: an epoch's end with and without validation, a training batch's end,
#: a validation within the epoch, accumulation (a batch's end that steps or not)
POINTS: dict[str, tuple[dict[str, Any], dict[str, Any], bool]] = {
    "epoch end, validation": ({}, {}, True),
    "epoch end, no validation": ({}, {}, False),
    "every 3 steps": ({"every_n_train_steps": 3}, {}, True),
    "validation within the epoch": ({}, {"val_check_interval": 2}, True),
    "accumulation": ({"every_n_train_steps": 1}, {"accumulate_grad_batches": 2}, False),
    "step scheduler, limit": ({"every_n_train_steps": 2}, {"limit_train_batches": 4}, True),
}


def make(lib: str, validation: bool) -> Any:
    base = pl.LightningModule if lib == "lightning" else ddpkit.Module

    class Net(base):  # type: ignore[misc, valid-type]
        def __init__(self, width: int = 3) -> None:
            super().__init__()
            self.save_hyperparameters()
            torch.manual_seed(0)
            self.body = nn.Sequential(nn.Linear(2, width), nn.Tanh(), nn.Linear(width, 1))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = nn.functional.mse_loss(self.body(x), y)
            self.log("loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            opt = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.7)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    if validation:

        def validation_step(self: Any, batch: Any, batch_idx: int) -> None:
            x, y = batch
            self.log("val_loss", nn.functional.mse_loss(self.body(x), y))

        Net.validation_step = validation_step  # type: ignore[attr-defined]
    return Net


def loader() -> DataLoader[Any]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(20, 2, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)  # 5 batches


def fit(
    lib: str, root: Path, point: str, *, max_epochs: int = 2, ckpt_path: str | None = None
) -> tuple[Any, Any]:
    callback_kw, trainer_kw, validation = POINTS[point]
    module = (pl if lib == "lightning" else ddpkit).callbacks.ModelCheckpoint
    trainer_class = pl.Trainer if lib == "lightning" else ddpkit.Trainer
    trainer = trainer_class(
        default_root_dir=root,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        max_epochs=max_epochs,
        num_sanity_val_steps=0,
        callbacks=[module(dirpath=root / "ckpt", save_top_k=-1, **callback_kw)],
        **trainer_kw,
    )
    model = make(lib, validation)()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on workers
        trainer.fit(model, loader(), loader() if validation else None, ckpt_path=ckpt_path)
    return trainer, model


def checkpoints(root: Path) -> dict[str, dict[str, Any]]:
    return {
        p.name: torch.load(p, weights_only=False) for p in sorted((root / "ckpt").glob("*.ckpt"))
    }


def weights(model: Any) -> list[list[float]]:
    return [p.detach().flatten().tolist() for p in model.parameters()]


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_checkpoint_holds_what_lightnings_holds(tmp_path: Path, point: str) -> None:
    fit("lightning", tmp_path / "pl", point)
    fit("ddpkit", tmp_path / "ddpkit", point)
    theirs, ours = checkpoints(tmp_path / "pl"), checkpoints(tmp_path / "ddpkit")
    assert list(ours) == list(theirs) and ours
    for name, expected in theirs.items():
        found = ours[name]
        assert found["pytorch-lightning_version"] == LIGHTNING_FORMAT, name
        for key in ("epoch", "global_step", "loops", "lr_schedulers", "hyper_parameters"):
            assert found[key] == expected[key], (name, key, found[key], expected[key])
        for key, value in expected["state_dict"].items():
            assert torch.allclose(found["state_dict"][key], value, atol=1e-6), (name, key)


@pytest.mark.parametrize("point", sorted(POINTS))
def test_lightning_resumes_a_ddpkit_checkpoint_as_its_own(tmp_path: Path, point: str) -> None:
    fit("lightning", tmp_path / "pl", point)
    fit("ddpkit", tmp_path / "ddpkit", point)
    for name in checkpoints(tmp_path / "pl"):
        ends = []
        for source in ("pl", "ddpkit"):
            path = tmp_path / source / "ckpt" / name
            root = tmp_path / f"resume-{source}-{name}"
            trainer, model = fit("lightning", root, point, max_epochs=3, ckpt_path=str(path))
            ends.append((trainer.current_epoch, trainer.global_step, weights(model)))
            shutil.rmtree(root)
        assert ends[1] == ends[0], name
        loaded = make("lightning", POINTS[point][2]).load_from_checkpoint(
            tmp_path / "ddpkit" / "ckpt" / name
        )
        assert loaded.hparams["width"] == 3


@pytest.mark.parametrize("point", sorted(POINTS))
def test_ddpkit_resumes_a_lightning_checkpoint_as_its_own(tmp_path: Path, point: str) -> None:
    fit("lightning", tmp_path / "pl", point)
    fit("ddpkit", tmp_path / "ddpkit", point)
    for name in checkpoints(tmp_path / "pl"):
        ends = []
        for source in ("ddpkit", "pl"):
            path = tmp_path / source / "ckpt" / name
            root = tmp_path / f"resume-{source}-{name}"
            trainer, model = fit("ddpkit", root, point, max_epochs=3, ckpt_path=str(path))
            ends.append((trainer.current_epoch, trainer.global_step, weights(model)))
            shutil.rmtree(root)
        assert ends[1] == ends[0], name
