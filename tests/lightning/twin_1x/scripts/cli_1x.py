"""A Lightning 1.9 script built on ``pytorch_lightning.cli.LightningCLI`` with subcommands:
``python cli_1x.py fit --effects F --trainer.max_epochs 2 ...`` and, later, ``python cli_1x.py
test --effects F --ckpt_path ckpt/last.ckpt``. Its subclass adds an argument of its own
(``add_arguments_to_parser``) and writes what the subcommand did (``effects_1x``) to it; every
run writes into the working folder.
"""

import os

import torch
from effects_1x import HookRecorder, RecordingModule, write_effects
from pytorch_lightning import LightningDataModule
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.cli import LightningCLI
from pytorch_lightning.loggers import CSVLogger
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

FOLDER = os.getcwd()


def dataset(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


class CLIModel(RecordingModule):
    def __init__(self, lr: float = 0.1, hidden: int = 5) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(4, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 2)
        )
        self.record_folder = FOLDER

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.net(x), y))

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test_loss", F.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class CLIData(LightningDataModule):
    def __init__(self, batch_size: int = 4) -> None:
        super().__init__()
        self.batch_size = batch_size

    def train_dataloader(self):
        return DataLoader(dataset(32, 0), batch_size=self.batch_size)

    def val_dataloader(self):
        return DataLoader(dataset(16, 1), batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(dataset(16, 2), batch_size=self.batch_size)


class TwinCLI(LightningCLI):
    def add_arguments_to_parser(self, parser):
        parser.add_argument("--effects", required=True)

    def instantiate_trainer(self, **kwargs):
        checkpoint = ModelCheckpoint(dirpath=os.path.join(FOLDER, "ckpt"), save_last=True)
        return super().instantiate_trainer(
            callbacks=[HookRecorder(FOLDER), checkpoint],
            logger=CSVLogger(FOLDER, name="csv"),
            **kwargs,
        )


def scalars(config) -> dict:
    """The plain values of a config section (objects such as the callbacks left out)."""
    items = vars(config) if not isinstance(config, dict) else config
    return {k: v for k, v in items.items() if v is None or isinstance(v, bool | int | float | str)}


def main() -> None:
    cli = TwinCLI(
        CLIModel,
        CLIData,
        trainer_defaults={
            "enable_progress_bar": False,
            "log_every_n_steps": 1,
        },
        seed_everything_default=123,
        save_config_kwargs={"overwrite": True},
    )
    config = cli.config[cli.subcommand]
    write_effects(
        config["effects"],
        cli.trainer,
        cli.model,
        subcommand=cli.subcommand,
        config=scalars(config["trainer"]),
        model_config=scalars(config["model"]),
        data_config=scalars(config["data"]),
        saved_configs=sorted(
            os.path.relpath(os.path.join(d, f), FOLDER)
            for d, _, files in os.walk(FOLDER)
            for f in files
            if f == "config.yaml"
        ),
    )


if __name__ == "__main__":
    main()
