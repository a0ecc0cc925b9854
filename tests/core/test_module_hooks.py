"""``ddpkit.Module``'s hooks and attributes, and plain ``nn.Module``s with the same hooks."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import MisconfigurationError, Trainer


def data() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 2, generator=g)
    return TensorDataset(x, x.sum(dim=1, keepdim=True))


def trainer(tmp_path: Path, **kwargs: Any) -> Trainer:
    options: dict[str, Any] = {
        "default_root_dir": tmp_path,
        "enable_progress_bar": False,
        "num_sanity_val_steps": 0,
        "max_epochs": 2,
        **kwargs,
    }
    return Trainer(**options)


class Returns(ddpkit.Module):
    """training_step returns whatever ``kind`` says; the data comes from the loader hooks."""

    def __init__(self, kind: str = "tensor") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.Linear(2, 1)
        self.kind = kind
        self.seen: dict[str, Any] = {}

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(data(), batch_size=4)

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(data(), batch_size=8)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> Any:
        self.seen.update(trainer=self.trainer, device=self.device, rank=self.global_rank)
        x, y = batch
        loss = F.mse_loss(self.layer(x), y)
        if self.kind == "dict":
            return {"loss": loss, "extra": 1}
        if self.kind == "none":
            return None
        if self.kind == "str":
            return "loss"
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        err = self.layer(x) - y
        self.log_dict({"val_mse": err.pow(2).mean(), "val_mae": err.abs().mean()}, prog_bar=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_attributes_outside_a_trainer() -> None:
    model = Returns()
    with pytest.raises(RuntimeError, match=r"Returns is not attached to a Trainer"):
        _ = model.trainer
    assert (model.global_rank, model.local_rank) == (0, 0)
    assert model.device == torch.device("cpu")
    model.log("ignored", 1.0)  # no trainer: nothing to record, no error
    assert ddpkit.Module().device == torch.device("cpu")  # no parameters


def test_attributes_inside_fit_and_the_loader_hooks(tmp_path: Path) -> None:
    model = Returns()
    before = model.layer.weight.detach().clone()
    t = trainer(tmp_path)
    t.fit(model)  # no loaders given: train_dataloader() and val_dataloader()
    assert model.seen == {"trainer": t, "device": torch.device("cpu"), "rank": 0}
    assert model.trainer is t
    assert not torch.equal(model.layer.weight, before)
    assert set(t.callback_metrics) == {"val_mse", "val_mae"}
    assert set(t.progress_bar_metrics) == {"val_mse", "val_mae"}


def test_a_dict_with_a_loss_trains_like_the_loss(tmp_path: Path) -> None:
    plain, as_dict = Returns("tensor"), Returns("dict")
    trainer(tmp_path / "a").fit(plain)
    trainer(tmp_path / "b").fit(as_dict)
    assert torch.equal(plain.layer.weight, as_dict.layer.weight)


def test_none_skips_the_batch(tmp_path: Path) -> None:
    model = Returns("none")
    before = model.layer.weight.detach().clone()
    trainer(tmp_path).fit(model)
    assert torch.equal(model.layer.weight, before)


def test_anything_else_is_an_error_that_says_what_to_return(tmp_path: Path) -> None:
    with pytest.raises(
        MisconfigurationError, match=r"training_step returned str; return the loss tensor"
    ):
        trainer(tmp_path).fit(Returns("str"))


def test_the_required_hooks_say_they_are_missing(tmp_path: Path) -> None:
    class Empty(ddpkit.Module):
        pass

    loader = DataLoader(data(), batch_size=4)
    with pytest.raises(NotImplementedError, match=r"Empty.configure_optimizers"):
        trainer(tmp_path).fit(Empty(), loader)

    class OnlyOptimizer(Empty):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(1))

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    with pytest.raises(NotImplementedError, match=r"OnlyOptimizer.training_step"):
        trainer(tmp_path).fit(OnlyOptimizer(), loader)


def test_a_plain_nn_module_with_the_hooks_trains(tmp_path: Path) -> None:
    """Duck typing: no ddpkit.Module, no self.log; the trainer leaves its attributes alone."""

    class Plain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = nn.Linear(2, 1)
            self.steps = 0

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            self.steps += 1
            x, y = batch
            return F.mse_loss(self.layer(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

        def train_dataloader(self) -> DataLoader[Any]:
            return DataLoader(data(), batch_size=4)

    model, reference = Plain(), Returns()
    trainer(tmp_path / "plain").fit(model)
    trainer(tmp_path / "module").fit(reference)
    assert model.steps == 8
    assert not hasattr(model, "trainer")
    assert torch.equal(model.layer.weight, reference.layer.weight)


def test_a_module_pickles_without_its_trainer(tmp_path: Path) -> None:
    model = Returns()
    trainer(tmp_path, max_epochs=1).fit(model)
    copy = pickle.loads(pickle.dumps(model))
    assert torch.equal(copy.layer.weight, model.layer.weight)
    with pytest.raises(RuntimeError, match="not attached"):
        _ = copy.trainer
    assert model.trainer is not None
