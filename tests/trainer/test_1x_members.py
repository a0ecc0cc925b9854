"""What Lightning 1.4's own callback, logger and accelerator tests read of ddpkit's objects
(tests at Lightning's tag 1.4.9, cited per test): ``LearningRateMonitor.lr_sch_names``, a
logger's ``root_dir`` without a name, ``ModelCheckpoint``'s line for a duplicated last
checkpoint, and ``lightning_module`` in an accelerator's or training type's loader hooks."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit.accelerators import CPUAccelerator
from ddpkit.callbacks import LearningRateMonitor, ModelCheckpoint
from ddpkit.loggers import CSVLogger, TensorBoardLogger
from ddpkit.plugins import SingleDevicePlugin
from ddpkit.plugins.precision import PrecisionPlugin


class Boring(ddpkit.Module):
    def __init__(self, name: str | None = None) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
        self.name = name

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return (self.a(batch[0]) + self.b(batch[0])).pow(2).mean()

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("v", self.a(batch[0]).sum())

    def configure_optimizers(self) -> Any:
        adam = torch.optim.Adam(self.parameters(), lr=0.1)
        scheduler = {"scheduler": torch.optim.lr_scheduler.StepLR(adam, 1), "name": self.name}
        return [adam], [scheduler]

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)

    val_dataloader = train_dataloader


@pytest.mark.parametrize(("name", "names"), [(None, ["lr-Adam"]), ("mine", ["mine"])])
def test_lr_monitor_names_each_scheduler(
    tmp_path: Path, name: str | None, names: list[str]
) -> None:
    """1.4's test_lr_monitor_single_lr / test_lr_monitor_custom_name: ``lr_sch_names``."""
    monitor = LearningRateMonitor()
    trainer = ddpkit.Trainer(
        default_root_dir=tmp_path, max_epochs=2, callbacks=[monitor], enable_progress_bar=False
    )
    trainer.fit(Boring(name))
    assert monitor.lr_sch_names == names
    assert list(monitor.lrs) == names


@pytest.mark.parametrize("kind", [CSVLogger, TensorBoardLogger])
@pytest.mark.parametrize("name", ["", None])
def test_a_logger_without_a_name_writes_into_its_save_dir(
    tmp_path: Path, kind: type, name: str | None
) -> None:
    """1.4's test_file_logger_no_name / test_tensorboard_no_name: ``root_dir`` is the folder."""
    if kind is TensorBoardLogger:
        pytest.importorskip("tensorboard")
    logger = kind(tmp_path, name=name)
    logger.save()
    assert logger.root_dir == str(tmp_path)
    assert logger.log_dir == str(tmp_path / "version_0")


def test_a_duplicated_last_checkpoint_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """1.4's test_model_checkpoint_save_last_none_monitor."""
    with caplog.at_level(logging.INFO, logger="ddpkit"):
        ModelCheckpoint(dirpath=tmp_path, monitor=None, save_top_k=-1, save_last=True)
    assert "will duplicate the last checkpoint saved" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ddpkit"):
        ModelCheckpoint(dirpath=tmp_path, monitor=None, save_top_k=1, save_last=True)
    assert caplog.text == ""


def test_loader_hooks_see_the_module_of_the_stage(tmp_path: Path) -> None:
    """1.4's test_accelerator_on_reset_dataloader_hooks (its count of one val loader for fit
    and validate together is 1.x's caching; Lightning 2.x, as ddpkit, makes one per stage)."""

    class Seen(CPUAccelerator):
        seen: ClassVar[list[tuple[str, bool]]] = []

        def on_reset_train_dataloader(self, dataloader: Any) -> Any:
            self.seen.append(("train", self.lightning_module.trainer.training))
            return super().on_reset_train_dataloader(dataloader)

        def on_reset_val_dataloader(self, dataloader: Any) -> Any:
            trainer = self.lightning_module.trainer
            self.seen.append(("val", trainer.training or trainer.validating))
            return super().on_reset_val_dataloader(dataloader)

    accelerator = Seen(PrecisionPlugin(), SingleDevicePlugin(device=torch.device("cpu")))
    trainer = ddpkit.Trainer(accelerator=accelerator, fast_dev_run=True, default_root_dir=tmp_path)
    model = Boring()
    trainer.fit(model)
    trainer.validate(model)
    assert accelerator.lightning_module is model
    assert sorted(accelerator.seen) == [("train", True), ("val", True), ("val", True)]
