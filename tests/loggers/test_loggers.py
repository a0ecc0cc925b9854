"""CSVLogger and TensorBoardLogger: Lightning's layout (save_dir/name/version_N), what the
Trainer logs to them, and the TensorBoard event files read back with tensorboard's own reader."""

from __future__ import annotations

import csv
import json
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest
import torch
import torch._dynamo
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import MisconfigurationError, Trainer
from ddpkit.loggers import CSVLogger, Logger, TensorBoardLogger

BATCHES = 4


class Logged(ddpkit.Module):
    def __init__(self, lr: float = 0.05, width: int = 1) -> None:
        super().__init__()
        self.save_hyperparameters()
        torch.manual_seed(0)
        self.layer = nn.Linear(2, width)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.mse_loss(self.layer(x).sum(1, keepdim=True), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.mse_loss(self.layer(x).sum(1, keepdim=True), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def data() -> DataLoader[Any]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 2, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)


def fit(tmp_path: Path, logger: Any, epochs: int = 2) -> Trainer:
    trainer = Trainer(
        default_root_dir=tmp_path,
        logger=logger,
        max_epochs=epochs,
        log_every_n_steps=2,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(Logged(lr=0.05), data(), data())
    return trainer


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_csv_layout_versions_and_contents(tmp_path: Path) -> None:
    first = CSVLogger(tmp_path / "logs")
    assert (first.name, first.version) == ("lightning_logs", 0)
    trainer = fit(tmp_path, first)
    assert trainer.logger is first and trainer.loggers == [first]
    folder = tmp_path / "logs" / "lightning_logs" / "version_0"
    assert trainer.log_dir == first.log_dir == str(folder)
    assert sorted(p.name for p in folder.iterdir()) == [
        "checkpoints",
        "hparams.yaml",
        "metrics.csv",
    ]
    assert json.loads((folder / "hparams.yaml").read_text()) == {"lr": 0.05, "width": 1}
    logged = rows(folder / "metrics.csv")
    # Lightning's step: the optimizer steps before the batch that logs (global_step - 1)
    assert [int(r["step"]) for r in logged if r["train_loss"]] == [1, 3, 5, 7]
    assert [(r["epoch"], r["step"]) for r in logged if r["val_loss"]] == [("0", "3"), ("1", "7")]
    # A second logger in the same folder takes the next version.
    assert CSVLogger(tmp_path / "logs").version == 1
    named = CSVLogger(tmp_path / "logs", name="exp", version="run-a", prefix="p")
    fit(tmp_path / "b", named, epochs=1)
    header = (tmp_path / "logs" / "exp" / "run-a" / "metrics.csv").read_text().splitlines()[0]
    # As in Lightning, the prefix goes on every key the Trainer logs, "epoch" included.
    assert header.split(",") == ["epoch", "step", "p-train_loss", "p-epoch", "p-val_loss"]


def test_logger_true_writes_metrics_csv_in_default_root_dir(tmp_path: Path) -> None:
    trainer = fit(tmp_path, True)
    assert isinstance(trainer.logger, CSVLogger)
    assert (tmp_path / "metrics.csv").is_file()
    assert (tmp_path / "hparams.yaml").is_file()
    assert trainer.log_dir.rstrip("/") == str(tmp_path)


def test_several_loggers_all_get_the_rows(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    a, b = CSVLogger(tmp_path, name="a"), TensorBoardLogger(tmp_path, name="b")
    trainer = fit(tmp_path, [a, b], epochs=1)
    assert trainer.loggers == [a, b]
    assert rows(Path(a.log_dir) / "metrics.csv")
    assert list(Path(b.log_dir).glob("events.out.tfevents.*"))


def test_tensorboard_event_files_hold_the_logged_scalars(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path / "tb")
    trainer = fit(tmp_path, logger)
    folder = tmp_path / "tb" / "lightning_logs" / "version_0"
    assert logger.log_dir == str(folder)
    events = EventAccumulator(str(folder))
    events.Reload()
    scalars = events.Tags()["scalars"]
    assert {"train_loss", "val_loss", "epoch", "hp_metric"} <= set(scalars)
    train = events.Scalars("train_loss")
    assert [e.step for e in train] == [1, 3, 5, 7]
    val = events.Scalars("val_loss")
    assert [e.step for e in val] == [3, 7]
    assert val[-1].value == pytest.approx(float(trainer.callback_metrics["val_loss"]))
    assert json.loads((folder / "hparams.yaml").read_text()) == {"lr": 0.05, "width": 1}
    # The hyperparameters are in TensorBoard's HPARAMS plugin too.
    plugin = events.PluginTagToContent("hparams")
    assert "_hparams_/session_start_info" in plugin


def test_tensorboard_extra_keywords_and_sub_dir(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    logger = TensorBoardLogger(tmp_path, name="n", version=3, sub_dir="extra", filename_suffix=".x")
    assert logger.log_dir == str(tmp_path / "n" / "version_3" / "extra")
    logger.log_metrics({"a": torch.tensor(1.5)}, step=0)
    logger.finalize("success")
    (event,) = Path(logger.log_dir).glob("events.out.tfevents.*")
    assert event.name.endswith(".x")


def test_a_logger_off_rank_zero_writes_nothing(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path, name="r1")
    logger.attach(1, 0)
    logger.log_metrics({"a": 1.0}, step=0)
    logger.log_hyperparams({"lr": 1})
    logger.experiment.anything(1, 2)  # a stand-in: no error, no file
    logger.finalize("success")
    assert not (tmp_path / "r1").exists()


@pytest.mark.parametrize("kind", ["CSVLogger", "TensorBoardLogger"])
def test_nested_hyperparameters_stay_nested_as_in_lightning(tmp_path: Path, kind: str) -> None:
    """hparams.yaml holds what was given, nested (Lightning's; ddpkit flattened it to opt/lr),
    and reads back the same as Lightning's own logger's file."""
    pl_loggers = pytest.importorskip("pytorch_lightning.loggers")
    yaml = pytest.importorskip("yaml")
    params = Namespace(opt={"lr": 0.1, "betas": [0.9, 0.99]}, layers=3)
    files = []
    for lib, folder in ((pl_loggers, tmp_path / "pl"), (ddpkit.loggers, tmp_path / "ddpkit")):
        logger = getattr(lib, kind)(folder, name="", version="")
        logger.log_hyperparams(params)
        logger.save()
        files.append(yaml.safe_load((folder / "hparams.yaml").read_text()))
    assert files[1] == files[0] == {"opt": {"lr": 0.1, "betas": [0.9, 0.99]}, "layers": 3}


def test_any_object_with_the_interface_is_a_logger_and_others_are_refused(tmp_path: Path) -> None:
    class Mine(Logger):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[dict[str, Any], int | None]] = []
            self.params: dict[str, Any] = {}

        name = "mine"
        version = 0

        def log_metrics(self, metrics: Any, step: int | None = None) -> None:
            self.rows.append((dict(metrics), step))

        def log_hyperparams(self, params: Any, *args: Any, **kw: Any) -> None:
            self.params.update(params)

    mine = Mine()
    fit(tmp_path, mine, epochs=1)
    assert mine.params == {"lr": 0.05, "width": 1}
    assert [step for row, step in mine.rows if "train_loss" in row] == [1, 3]  # Lightning's
    with pytest.raises(
        MisconfigurationError, match=r"Trainer\(logger='csv'\): str is not a logger"
    ):
        Trainer(logger="csv")
