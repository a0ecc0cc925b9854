"""A Lightning 1.x user's script: a LightningModule with ``self.log`` and
``save_hyperparameters``, a LightningDataModule, ModelCheckpoint, EarlyStopping, a custom
Callback and a CSVLogger, trained on two CPU ranks, then tested.

    python lit_run.py --trainer ddpkit --call ddp_cpu --out DIR       # 1.x flags, ddpkit.lightning
    python lit_run.py --trainer lightning --strategy ddp --out DIR    # pytorch_lightning.Trainer(
                                                                      #   accelerator="cpu", devices=2,
                                                                      #   strategy="ddp")

Every rank writes ``DIR/hooks-<stage>-rank<N>.json`` (the hooks the custom callback saw there); the
process that called ``fit`` and ``test`` writes ``DIR/result.pt`` (weights, metrics, what
``test()`` returned, the best checkpoint and what ``load_from_checkpoint`` read from it) and, for
ddpkit, ``DIR/lightning_call.txt``: the Lightning 2.x call its warning named.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SEED = 1234
MAX_EPOCHS = 6


class Regressor(pl.LightningModule):
    def __init__(self, hidden: int = 16, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(6, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def _loss(self, batch: Any) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = self._loss(batch)
        self.log("train_loss", loss, on_step=True, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self._loss(batch), sync_dist=True)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self.log("test_loss", self._loss(batch), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class LinearData(pl.LightningDataModule):
    def __init__(self, batch_size: int = 16) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage: str) -> None:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(320, 6, generator=g)
        y = x @ torch.linspace(-1.0, 1.0, 6).unsqueeze(1) + 0.1 * torch.randn(320, 1, generator=g)
        self.train_set = TensorDataset(x[:192], y[:192])
        self.val_set = TensorDataset(x[192:256], y[192:256])
        self.test_set = TensorDataset(x[256:], y[256:])

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=self.batch_size)


class HookRecorder(pl.Callback):
    """Records on every rank which hooks ran, and writes them down at teardown."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.seen: list[str] = []

    def _note(self, name: str, trainer: pl.Trainer) -> None:
        self.seen.append(f"{name}@{trainer.current_epoch}")

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._note("on_fit_start", trainer)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._note("on_train_epoch_end", trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._note("on_validation_end", trainer)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._note("on_test_end", trainer)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        stopping = trainer.early_stopping_callback
        record = {
            "rank": trainer.global_rank,
            "world_size": trainer.world_size,
            "pid": os.getpid(),
            "seen": self.seen,
            "current_epoch": trainer.current_epoch,
            "global_step": trainer.global_step,
            "stopped_epoch": stopping.stopped_epoch if stopping is not None else None,
        }
        name = getattr(stage, "value", stage)  # "fit", "test"
        path = Path(self.out) / f"hooks-{name}-rank{trainer.global_rank}.json"
        path.write_text(json.dumps(record))
        self.seen = []


#: The four mission calls of Lightning 1.x (shared/DESIGN.md).
MISSION = ("ddp_cpu", "ddp_cpu+DDPSpawnPlugin", "ddp_cpu+DDPPlugin", "num_processes+DDPPlugin")


def mission_flags(call: str) -> dict[str, Any]:
    from ddpkit.lightning import DDPPlugin, DDPSpawnPlugin

    return {
        "ddp_cpu": {"accelerator": "ddp_cpu", "num_processes": 2},
        "ddp_cpu+DDPSpawnPlugin": {
            "accelerator": "ddp_cpu",
            "num_processes": 2,
            "plugins": [DDPSpawnPlugin(find_unused_parameters=True)],
        },
        "ddp_cpu+DDPPlugin": {
            "accelerator": "ddp_cpu",
            "num_processes": 2,
            "plugins": [DDPPlugin(find_unused_parameters=True)],
        },
        "num_processes+DDPPlugin": {"num_processes": 2, "plugins": [DDPPlugin()]},
    }[call]


class CleanExit(pl.Callback):
    """The reference's spawned ranks exit without their process group, as ddpkit.lightning's
    do: gloo may otherwise abort a rank at its exit ("terminate called without an active
    exception", pytorch/pytorch#179291). The training is untouched."""

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        from ddpkit._runtime.ranks._clean_exit import destroy_group_at_exit

        destroy_group_at_exit()


def make_trainer(
    kind: str,
    call: str,
    strategy: str,
    out: Path,
    callbacks: list[pl.Callback],
    supervise: bool | None,
) -> pl.Trainer:
    logger = CSVLogger(save_dir=str(out), name="logs")
    if kind == "ddpkit":
        from ddpkit.lightning import Trainer

        flags = mission_flags(call)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer = Trainer(
                **flags,
                max_epochs=MAX_EPOCHS,
                callbacks=callbacks,
                logger=logger,
                progress_bar_refresh_rate=0,  # 1.x keywords, mapped
                weights_summary=None,
                log_every_n_steps=2,
                **({} if supervise is None else {"supervise": supervise}),
            )
        if trainer.global_rank == 0 and os.environ.get("LOCAL_RANK", "0") == "0":
            assert trainer.lightning_call is not None
            (out / "lightning_call.txt").write_text(trainer.lightning_call)
            (out / "warnings.json").write_text(json.dumps([str(w.message) for w in caught]))
        return trainer
    return pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=strategy,
        max_epochs=MAX_EPOCHS,
        callbacks=[*callbacks, CleanExit()],
        logger=logger,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=2,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trainer", choices=["ddpkit", "lightning"], required=True)
    parser.add_argument("--call", choices=MISSION, default="ddp_cpu")
    parser.add_argument("--strategy", choices=["ddp", "ddp_spawn"], default="ddp")
    parser.add_argument(
        "--supervise",
        choices=["default", "true", "false"],
        default="default",
        help="Trainer(supervise=...): left out (ddpkit's launchers), True, or False (Lightning's)",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    out: Path = args.out
    pl.seed_everything(SEED, workers=True)
    model = Regressor()
    checkpoint = ModelCheckpoint(
        dirpath=str(out / "ckpt"),
        monitor="val_loss",
        save_top_k=2,
        filename="{epoch}-{val_loss:.5f}",
    )
    stopping = EarlyStopping(monitor="val_loss", patience=1, min_delta=0.01)
    callbacks = [checkpoint, stopping, HookRecorder(str(out))]
    supervise = {"default": None, "true": True, "false": False}[args.supervise]
    trainer = make_trainer(args.trainer, args.call, args.strategy, out, callbacks, supervise)
    trainer.fit(model, datamodule=LinearData())
    tested = trainer.test(model, datamodule=LinearData(), ckpt_path=None, verbose=False)
    if trainer.global_rank != 0:
        return
    best = trainer.checkpoint_callback.best_model_path
    loaded = Regressor.load_from_checkpoint(best)
    torch.save(
        {
            "state": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "callback_metrics": {k: float(v) for k, v in trainer.callback_metrics.items()},
            "tested": tested,
            "best_model_path": best,
            "loaded_hparams": dict(loaded.hparams),
            "loaded_state": {k: v.detach().cpu() for k, v in loaded.state_dict().items()},
            "stopped_epoch": stopping.stopped_epoch,
            "current_epoch": trainer.current_epoch,
            "global_step": trainer.global_step,
            "pid": os.getpid(),
            "strategy": type(trainer.strategy).__name__,
        },
        out / "result.pt",
    )


if __name__ == "__main__":
    main()
