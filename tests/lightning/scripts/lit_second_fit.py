"""``trainer.fit`` called again on the same Trainer, as a 1.x script does (Lightning's MNIST
hello-world fits twice): two CPU ranks, one epoch, a second ``fit`` with nothing left to do, then
``fit_loop.max_epochs`` raised and a third ``fit`` that trains one epoch more.

    python lit_second_fit.py --plugin DDPPlugin|DDPSpawnPlugin --out DIR

The process that called ``fit`` writes ``DIR/result.pt``: the counters and weights after each
``fit``, the ModelCheckpoint's and EarlyStopping's state, the checkpoint files and the logged
rows. With ``DDPPlugin`` this process is rank zero (what Lightning's own ``ddp`` does); with
``DDPSpawnPlugin`` every rank is spawned, and the same must come back.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from lit_run import SEED, LinearData, Regressor
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger

from ddpkit.lightning import DDPPlugin, DDPSpawnPlugin, Trainer


def snapshot(trainer: pl.Trainer, model: Regressor) -> dict[str, Any]:
    return {
        "global_step": trainer.global_step,
        "current_epoch": trainer.current_epoch,
        "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plugin", choices=["DDPPlugin", "DDPSpawnPlugin"], required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    out: Path = args.out
    pl.seed_everything(SEED, workers=True)
    model = Regressor()
    checkpoint = ModelCheckpoint(dirpath=str(out / "ckpt"), monitor="val_loss", save_top_k=1,
                                 filename="{epoch}-{val_loss:.5f}")  # fmt: skip
    stopping = EarlyStopping(monitor="val_loss", patience=3)
    plugin = {"DDPPlugin": DDPPlugin, "DDPSpawnPlugin": DDPSpawnPlugin}[args.plugin]()
    trainer = Trainer(
        num_processes=2, plugins=[plugin], max_epochs=1, callbacks=[checkpoint, stopping],
        logger=CSVLogger(save_dir=str(out), name="logs"), enable_progress_bar=False,
        enable_model_summary=False, log_every_n_steps=2,
    )  # fmt: skip
    fits = []
    for max_epochs in (1, 1, 2):  # the second fit has nothing left to do; the third trains
        trainer.fit_loop.max_epochs = max_epochs
        trainer.fit(model, datamodule=LinearData())
        fits.append(snapshot(trainer, model))
    if trainer.global_rank != 0:
        return
    rows = [
        dict(row)
        for path in sorted(out.glob("logs/*/metrics.csv"))
        for row in csv.DictReader(path.open())
    ]
    torch.save(
        {
            "fits": fits,
            "best_k_models": {Path(k).name: float(v) for k, v in checkpoint.best_k_models.items()},
            "best_model_path": Path(checkpoint.best_model_path).name,
            "stopping": {
                "wait_count": stopping.wait_count,
                "best_score": float(stopping.best_score),
            },
            "checkpoints": sorted(p.name for p in (out / "ckpt").iterdir()),
            "log_dirs": sorted(p.parent.name for p in out.glob("logs/*/metrics.csv")),
            "rows": rows,
        },
        out / "result.pt",
    )


if __name__ == "__main__":
    main()
