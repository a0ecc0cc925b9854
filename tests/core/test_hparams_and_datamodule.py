"""save_hyperparameters / hparams / load_from_checkpoint, and DataModules (ddpkit's and
Lightning's) in fit / validate / test / predict."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import DataModule, DDPKitWarning, MisconfigurationError, Trainer
from ddpkit.core import AttributeDict

try:  # imported at collection: Lightning's import sets an environment variable of torch's
    import pytorch_lightning as pl
except ImportError:  # pragma: no cover - the `lightning` extra is not installed
    pl = None


def quiet(tmp_path: Path, **kwargs: Any) -> Trainer:
    return Trainer(
        default_root_dir=tmp_path,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=1,
        **kwargs,
    )


class Net(ddpkit.Module):
    def __init__(
        self, hidden: int = 4, lr: float = 0.1, activation: str = "tanh", **extra: Any
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.mse_loss(self(x), y))

    def test_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", F.mse_loss(self(x), y))

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self(batch[0])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class Wider(Net):
    def __init__(self, depth: int = 2, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.save_hyperparameters()


def test_save_hyperparameters_takes_every_init_argument() -> None:
    net = Net(hidden=8, extra_flag=True)
    assert net.hparams == {"hidden": 8, "lr": 0.1, "activation": "tanh", "extra_flag": True}
    assert isinstance(net.hparams, AttributeDict) and net.hparams.hidden == 8
    net.hparams.lr = 0.5
    assert net.hparams_initial.lr == 0.1  # the initial ones stay as saved
    assert Wider(depth=3, hidden=6).hparams == {
        "hidden": 6,
        "lr": 0.1,
        "activation": "tanh",
        "depth": 3,
    }


def test_save_hyperparameters_by_name_ignore_and_containers() -> None:
    class Some(ddpkit.Module):
        def __init__(self, a: int, b: int, encoder: nn.Module) -> None:
            super().__init__()
            self.save_hyperparameters("a")

    assert Some(1, 2, nn.Identity()).hparams == {"a": 1}

    class Ignores(ddpkit.Module):
        def __init__(self, a: int, encoder: nn.Module) -> None:
            super().__init__()
            self.save_hyperparameters(ignore=["encoder"])

    assert Ignores(1, nn.Identity()).hparams == {"a": 1}

    class FromNamespace(ddpkit.Module):
        def __init__(self, args: Namespace) -> None:
            super().__init__()
            self.save_hyperparameters(args)

    assert FromNamespace(Namespace(lr=0.3, depth=2)).hparams == {"lr": 0.3, "depth": 2}

    class Wrong(ddpkit.Module):
        def __init__(self, a: int) -> None:
            super().__init__()
            self.save_hyperparameters("b")

    with pytest.raises(MisconfigurationError, match=r"save_hyperparameters\('b'\).*'b'.*\['a'\]"):
        Wrong(1)


def test_a_module_in_the_hyperparameters_warns_to_ignore_it() -> None:
    class Holds(ddpkit.Module):
        def __init__(self, encoder: nn.Module) -> None:
            super().__init__()
            self.save_hyperparameters()

    with pytest.warns(UserWarning, match=r"'encoder' is an nn.Module.*ignore=\['encoder'\]"):
        Holds(nn.Identity())


def test_load_from_checkpoint_rebuilds_with_the_saved_hyperparameters(tmp_path: Path) -> None:
    loader = data()
    model = Net(hidden=6, lr=0.2)
    trainer = quiet(tmp_path, max_epochs=2)
    trainer.fit(model, loader, loader)
    path = trainer.checkpoint_callback.best_model_path
    restored = Net.load_from_checkpoint(path)
    assert restored.hparams == {"hidden": 6, "lr": 0.2, "activation": "tanh"}
    for name, value in model.state_dict().items():
        assert torch.equal(restored.state_dict()[name], value), name
    # Keyword overrides win over the saved values (and reach __init__).
    tweaked = Net.load_from_checkpoint(path, lr=0.01)
    assert tweaked.hparams.lr == 0.01 and tweaked.hparams.hidden == 6
    # A shape that does not match the weights is torch's error, not a silent half-load.
    with pytest.raises(RuntimeError, match="size mismatch"):
        Net.load_from_checkpoint(path, hidden=3)
    # hparams_file= replaces the saved hyperparameters (the logger's hparams.yaml).
    assert (
        Net.load_from_checkpoint(path, hparams_file=tmp_path / "hparams.yaml").hparams.hidden == 6
    )


def test_load_from_checkpoint_calls_on_load_checkpoint(tmp_path: Path) -> None:
    class Saves(Net):
        def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
            checkpoint["vocabulary"] = ["a", "b"]

        def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
            self.vocabulary = checkpoint["vocabulary"]

    trainer = quiet(tmp_path, max_epochs=1)
    trainer.fit(Saves(), data())
    loaded = Saves.load_from_checkpoint(trainer.checkpoint_callback.best_model_path)
    assert loaded.vocabulary == ["a", "b"]


def test_test_with_the_best_checkpoint_uses_its_weights(tmp_path: Path) -> None:
    model = Net()
    trainer = quiet(
        tmp_path, max_epochs=3, callbacks=[ddpkit.callbacks.ModelCheckpoint(monitor="val_loss")]
    )
    trainer.fit(model, data(), data())
    best = Net.load_from_checkpoint(trainer.checkpoint_callback.best_model_path)
    [expected] = quiet(tmp_path / "b").test(best, data())
    [got] = trainer.test(dataloaders=data(), ckpt_path="best")
    assert got == expected
    assert trainer.ckpt_path == trainer.checkpoint_callback.best_model_path
    # No last checkpoint (save_last is off): Lightning warns and loads none ("set and forget"),
    # so the fitted module's weights are tested.
    with pytest.warns(DDPKitWarning, match=r'ckpt_path="last"\) is set, but there is no last'):
        [current] = trainer.test(dataloaders=data(), ckpt_path="last")
    assert trainer.ckpt_path is None
    [as_it_is] = trainer.test(model, data())
    assert current == as_it_is


def test_a_fit_resumes_from_the_last_checkpoint_in_the_folder_or_starts_afresh(
    tmp_path: Path,
) -> None:
    """fit(ckpt_path="last") in a script's every run, as Lightning users write it: the first run
    finds none and starts from scratch (a warning), the next resumes from the folder's newest
    last*.ckpt, written by another Trainer."""

    def run(max_epochs: int) -> Any:
        checkpoint = ddpkit.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
        trainer = quiet(tmp_path, max_epochs=max_epochs, callbacks=[checkpoint])
        trainer.fit(Net(), data(), data(), ckpt_path="last")
        return trainer

    with pytest.warns(DDPKitWarning, match="No checkpoint will be loaded"):
        first = run(1)
    assert first.global_step == first.num_training_batches
    with pytest.warns(DDPKitWarning, match="exists and is not empty"):  # as Lightning warns
        second = run(2)
    assert second.ckpt_path == str(tmp_path / "ckpt" / "last.ckpt")
    assert second.global_step == 2 * first.num_training_batches  # one epoch more, not two


def test_without_a_model_the_fitted_one_runs_with_its_best_weights(tmp_path: Path) -> None:
    model = Net()
    trainer = quiet(tmp_path, max_epochs=2)
    with pytest.raises(MisconfigurationError, match=r"Trainer.validate\(\): no model"):
        trainer.validate()
    trainer.fit(model, data(), data())
    with pytest.warns(UserWarning, match=r"Trainer.test\(\) got no model: it uses the fitted one"):
        [metrics] = trainer.test(dataloaders=data())
    assert set(metrics) == {"test_loss"}
    predictions = trainer.predict(dataloaders=data(), ckpt_path="best")
    assert len(predictions) == 4


class Squares(DataModule):
    def __init__(self, n: int = 16, batch_size: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.calls: list[str] = []

    def prepare_data(self) -> None:
        self.calls.append("prepare_data")

    def setup(self, stage: str) -> None:
        self.calls.append(f"setup:{stage}")
        g = torch.Generator().manual_seed(0)
        x = torch.randn(self.hparams.n, 2, generator=g)
        self.dataset = TensorDataset(x, x.pow(2).sum(1, keepdim=True))

    def teardown(self, stage: str) -> None:
        self.calls.append(f"teardown:{stage}")

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.dataset, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.dataset, batch_size=8)

    def test_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.dataset, batch_size=8)

    def predict_dataloader(self) -> DataLoader[Any]:
        return DataLoader(self.dataset, batch_size=8)


def test_a_datamodule_feeds_every_stage(tmp_path: Path) -> None:
    dm, model = Squares(), Net()
    trainer = quiet(tmp_path, max_epochs=2)
    trainer.fit(model, datamodule=dm)
    assert trainer.global_step == 8 and trainer.datamodule is dm and dm.trainer is trainer
    [val] = trainer.validate(model, dm)  # positionally, as in Lightning
    [test] = trainer.test(model, datamodule=dm)
    predictions = trainer.predict(model, datamodule=dm)
    assert set(val) == {"val_loss"} and set(test) == {"test_loss"}
    assert len(predictions) == 2
    assert dm.calls == [
        "prepare_data", "setup:fit", "teardown:fit",
        "prepare_data", "setup:validate", "teardown:validate",
        "prepare_data", "setup:test", "teardown:test",
        "prepare_data", "setup:predict", "teardown:predict",
    ]  # fmt: skip
    saved = torch.load(trainer.checkpoint_callback.best_model_path, weights_only=True)
    assert saved["datamodule_hyper_parameters"] == {"n": 16, "batch_size": 4}
    assert Squares.load_from_checkpoint(trainer.checkpoint_callback.best_model_path).hparams.n == 16


def test_loaders_and_a_datamodule_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(
        MisconfigurationError, match=r"pass the loaders or the DataModule, not both"
    ):
        quiet(tmp_path).fit(Net(), data(), datamodule=Squares())
    with pytest.raises(MisconfigurationError, match=r"datamodule=<int>\): not a DataModule"):
        quiet(tmp_path).fit(Net(), datamodule=3)


def test_a_lightning_datamodule_is_accepted(tmp_path: Path) -> None:
    if pl is None:
        pytest.skip("the `lightning` extra is not installed")

    class LitData(pl.LightningDataModule):  # type: ignore[misc, name-defined]
        def setup(self, stage: str) -> None:
            self.loader = data()

        def train_dataloader(self) -> DataLoader[Any]:
            return self.loader

    trainer = quiet(tmp_path, max_epochs=1)
    trainer.fit(Net(), LitData())
    assert trainer.global_step == 4


def data() -> DataLoader[Any]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 2, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
