"""``ddpkit.lightning.Trainer``'s stage methods: Lightning 2.x's signatures (which LightningCLI's
subcommands read: ``test --ckpt_path x.ckpt``), 1.x's loader keywords, and a ``ckpt_path`` that
restores what 1.x restored — the module and the data module at every stage, the callbacks only
when fitting. In-process, one CPU."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")
pytest.importorskip("jsonargparse", reason="the `lightning` extra is not installed")

import torch  # noqa: E402
from pytorch_lightning.callbacks import ModelCheckpoint  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from ddpkit import DDPKitDeprecationWarning, MisconfigurationError  # noqa: E402
from ddpkit.lightning import LightningCLI, Trainer  # noqa: E402

#: Each stage's 1.x keyword beside Lightning 2.x's parameters (renamed in Lightning 1.4).
ONE_X = {"fit": ["train_dataloader"], "validate": ["val_dataloaders"],
         "test": ["test_dataloaders"], "predict": []}  # fmt: skip


class Model(pl.LightningModule):
    def __init__(self, hidden: int = 4) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3, hidden)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.layer(batch[0]).pow(2).mean())

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.log("test_loss", self.layer(batch[0]).pow(2).mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> DataLoader:
        return loader()

    def val_dataloader(self) -> DataLoader:
        return loader()

    def test_dataloader(self) -> DataLoader:
        return loader()


def loader() -> DataLoader:
    return DataLoader(TensorDataset(torch.randn(8, 3, generator=torch.Generator().manual_seed(0))),
                      batch_size=4)  # fmt: skip


class Counter(pl.Callback):
    """A callback with a state: the training batches it saw; and what restored it."""

    def __init__(self) -> None:
        self.batches, self.loaded = 0, 0

    def on_train_batch_end(self, *_: Any) -> None:
        self.batches += 1

    def state_dict(self) -> dict[str, int]:
        return {"batches": self.batches}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.batches = state_dict["batches"]
        self.loaded += 1


def trainer(tmp_path: Path, **kwargs: Any) -> Trainer:
    return Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                   enable_model_summary=False, default_root_dir=tmp_path, **kwargs)  # fmt: skip


@pytest.mark.parametrize("stage", ["fit", "validate", "test", "predict"])
def test_each_stage_has_lightnings_signature_then_the_1x_keywords(stage: str) -> None:
    theirs = list(inspect.signature(getattr(pl.Trainer, stage)).parameters.values())
    ours = list(inspect.signature(getattr(Trainer, stage)).parameters.values())
    for mine, lightning in zip(ours, theirs):
        assert (mine.name, mine.kind, mine.default) == (
            lightning.name, lightning.kind, lightning.default,
        )  # fmt: skip
    extra = ours[len(theirs) :]
    assert [p.name for p in extra] == ONE_X[stage]
    assert all(p.kind is p.KEYWORD_ONLY and p.default is None for p in extra)


def test_the_cli_tests_the_checkpoint_its_ckpt_path_names(tmp_path: Path) -> None:
    quiet = [f"--trainer.default_root_dir={tmp_path}", "--trainer.enable_progress_bar=false",
             "--trainer.enable_model_summary=false", "--trainer.logger=false"]  # fmt: skip
    fit = LightningCLI(Model, args=["fit", "--trainer.max_steps=1", *quiet])
    path = fit.trainer.checkpoint_callback.best_model_path
    # the fit saved config.yaml in the same folder (no logger: log_dir is default_root_dir)
    cli = LightningCLI(Model, args=["test", "--ckpt_path", path, "--verbose", "false", *quiet],
                       save_config_kwargs={"overwrite": True})  # fmt: skip
    assert cli.config["test"]["ckpt_path"] == path and cli.config["test"]["verbose"] is False
    assert cli.trainer.ckpt_path == path and "test_loss" in cli.trainer.callback_metrics


def test_the_cli_help_lists_them_and_not_the_1x_loader_keywords(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        LightningCLI(Model, args=["test", "--help"])
    said = capsys.readouterr().out
    assert "--ckpt_path" in said and "--verbose" in said
    assert "--test_dataloaders" not in said


def test_a_1x_loader_keyword_is_the_2x_one(tmp_path: Path) -> None:
    model, run = Model(), trainer(tmp_path, max_steps=1)
    with pytest.warns(DDPKitDeprecationWarning, match=r"trainer\.validate\(val_dataloaders="):
        found = run.validate(model, val_dataloaders=loader(), verbose=False)
    assert set(found[0]) == {"val_loss"}
    with pytest.raises(
        MisconfigurationError,
        match=r"trainer\.test\(test_dataloaders=\.\.\., dataloaders=\.\.\.\): the loaders "
        r"twice, by their 1\.x and their Lightning 2\.x keyword\. Fix: drop test_dataloaders=",
    ):
        run.test(model, dataloaders=loader(), test_dataloaders=loader())


def test_a_test_from_a_checkpoint_leaves_the_callbacks_as_the_fit_left_them(
    tmp_path: Path,
) -> None:
    """1.x restored callbacks only when fitting (Lightning 2.x: at every stage); the module's
    weights come from the checkpoint all the same."""
    counter = Counter()
    best = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val_loss", save_last=True)
    run = trainer(tmp_path, max_epochs=3, callbacks=[counter, best])
    model = Model()
    run.fit(model)
    last, best_path = best.last_model_path, best.best_model_path
    saved = torch.load(best_path, weights_only=False)
    assert counter.batches == 6 and saved["callbacks"]["Counter"]["batches"] <= 6
    counter.batches = 100  # the state a test must leave as it is
    with torch.no_grad():
        model.layer.weight.zero_()
    run.test(model, ckpt_path="best", verbose=False)
    assert (counter.batches, counter.loaded) == (100, 0)
    assert (best.last_model_path, best.best_model_path) == (last, best_path)
    assert torch.equal(model.layer.weight, saved["state_dict"]["layer.weight"])
    resumed = Counter()
    trainer(tmp_path, max_epochs=4, callbacks=[resumed]).fit(Model(), ckpt_path=last)
    assert resumed.loaded == 1 and resumed.batches == 6 + 2  # fitting restores them
