"""A Lightning 1.x script, unchanged but for one import, on today's Lightning with 2 CPU ranks.

    python examples/lightning_1x.py                 # Lightning's own DDP, the 1.x flags resolved
    python examples/lightning_1x.py --supervise     # the same, on ddpkit's supervised launchers

The Trainer call is Lightning 1.x's (``accelerator="ddp_cpu"``, ``num_processes``,
``plugins=[DDPPlugin(...)]``, ``progress_bar_refresh_rate``, ``weights_summary``); everything
else is Lightning 2.x's own: the LightningModule, the LightningDataModule, ModelCheckpoint,
EarlyStopping, the CSVLogger. It prints the Lightning 2.x call that means the same, the test
loss and the best checkpoint.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split

from ddpkit import DDPKitDeprecationWarning
from ddpkit.lightning import DDPPlugin, Trainer  # was: from pytorch_lightning import Trainer


class Regressor(pl.LightningModule):
    def __init__(self, hidden: int = 32, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def step(self, batch: Any, name: str) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        self.log(name, loss, on_epoch=True, sync_dist=True)
        return loss

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.step(batch, "train_loss")

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.step(batch, "val_loss")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.step(batch, "test_loss")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class Data(pl.LightningDataModule):
    def setup(self, stage: str) -> None:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(1024, 8, generator=g)
        y = torch.sin(x[:, :2]).sum(1, keepdim=True) + 0.05 * torch.randn(1024, 1, generator=g)
        split = torch.Generator().manual_seed(1)
        self.train, self.val, self.test = random_split(TensorDataset(x, y), [768, 128, 128], split)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=32, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val, batch_size=64)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test, batch_size=64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--root-dir", type=Path, default=Path("runs/lightning_1x"))
    parser.add_argument("--supervise", action="store_true", help="ddpkit's supervised launchers")
    args = parser.parse_args()

    pl.seed_everything(7)
    checkpoint = ModelCheckpoint(dirpath=args.root_dir / "checkpoints", monitor="val_loss")
    with warnings.catch_warnings(record=True) as legacy:
        warnings.simplefilter("always", DDPKitDeprecationWarning)
        trainer = Trainer(
            accelerator="ddp_cpu",
            num_processes=2,
            plugins=[DDPPlugin(find_unused_parameters=False)],
            max_epochs=args.epochs,
            callbacks=[checkpoint, EarlyStopping(monitor="val_loss", patience=3)],
            logger=CSVLogger(args.root_dir, name="logs"),
            progress_bar_refresh_rate=0,
            weights_summary=None,
            log_every_n_steps=4,
            supervise=args.supervise,
        )
    model, data = Regressor(), Data()
    trainer.fit(model, datamodule=data)
    (result,) = trainer.test(model, datamodule=data, verbose=False)
    if trainer.is_global_zero:
        for warning in legacy:
            print(f"1.x spelling: {warning.message}")
        print(f"Lightning 2.x spelling of the device flags: {trainer.lightning_call}")
        print(f"strategy: {type(trainer.strategy).__name__}, epochs run: {trainer.current_epoch}")
        print(f"test_loss={result['test_loss']:.4f}")
        best = Regressor.load_from_checkpoint(checkpoint.best_model_path)
        print(f"best checkpoint: {checkpoint.best_model_path} (hidden={best.hparams.hidden})")


if __name__ == "__main__":
    main()
