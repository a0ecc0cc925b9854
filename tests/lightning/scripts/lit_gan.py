"""A Lightning 1.x GAN (automatic optimization, ``training_step(batch, batch_idx,
optimizer_idx)``, ``configure_optimizers`` returning two optimizers), and the same GAN written
for Lightning 2.x with manual optimization, trained on two CPU ranks:

    python lit_gan.py --gan 1x --call ddp_cpu --out DIR       # ddpkit.lightning.Trainer, 1.x flags
    python lit_gan.py --gan 1x --call unused_false --out DIR  # ... find_unused_parameters=False
    python lit_gan.py --gan 2x --out DIR                      # pytorch_lightning.Trainer, manual

The process that called ``fit`` writes ``DIR/result.pt``: the weights (parameters and BatchNorm's
buffers), ``global_step``, and on rank 0 what ``training_epoch_end`` got.
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

SEED = 4321
LATENT = 4


class Nets(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.generator = nn.Sequential(
            nn.Linear(LATENT, 16), nn.BatchNorm1d(16), nn.LeakyReLU(0.2), nn.Linear(16, 6)
        )
        self.discriminator = nn.Sequential(nn.Linear(6, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
        self.epoch_outputs: list[Any] = []

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.generator(z)

    def generator_loss(self, real: torch.Tensor) -> torch.Tensor:
        z = torch.randn(real.shape[0], LATENT)
        valid = torch.ones(real.shape[0], 1)
        return F.binary_cross_entropy_with_logits(self.discriminator(self(z)), valid)

    def discriminator_loss(self, real: torch.Tensor) -> torch.Tensor:
        z = torch.randn(real.shape[0], LATENT)
        valid, fake = torch.ones(real.shape[0], 1), torch.zeros(real.shape[0], 1)
        real_loss = F.binary_cross_entropy_with_logits(self.discriminator(real), valid)
        fake_loss = F.binary_cross_entropy_with_logits(self.discriminator(self(z).detach()), fake)
        return (real_loss + fake_loss) / 2

    def optimizers_of_both(self) -> list[torch.optim.Optimizer]:
        return [
            torch.optim.Adam(self.generator.parameters(), lr=0.01, betas=(0.5, 0.999)),
            torch.optim.Adam(self.discriminator.parameters(), lr=0.01, betas=(0.5, 0.999)),
        ]

    def train_dataloader(self) -> DataLoader:
        g = torch.Generator().manual_seed(0)
        real = torch.randn(96, 6, generator=g) * 0.5 + 1.0
        return DataLoader(TensorDataset(real), batch_size=8)


class OneXGAN(Nets):
    """As a Lightning 1.x user wrote it."""

    def training_step(self, batch: Any, batch_idx: int, optimizer_idx: int) -> Any:
        (real,) = batch
        if optimizer_idx == 0:
            loss = self.generator_loss(real)
            self.log("g_loss", loss)
            return loss
        loss = self.discriminator_loss(real)
        self.log("d_loss", loss)
        return {"loss": loss, "batch": batch_idx}

    def training_epoch_end(self, outputs: list[Any]) -> None:
        self.epoch_outputs.append(
            [[(sorted(o), bool(o["loss"].requires_grad)) for o in per] for per in outputs]
        )

    def configure_optimizers(self) -> Any:
        return self.optimizers_of_both(), []


class ManualGAN(Nets):
    """The same GAN in Lightning 2.x's own spelling: manual optimization, as its docs write it."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> None:
        (real,) = batch
        for optimizer, loss_of, name in zip(
            self.optimizers(), (self.generator_loss, self.discriminator_loss), ("g", "d")
        ):
            self.toggle_optimizer(optimizer)
            loss = loss_of(real)
            self.log(f"{name}_loss", loss)
            optimizer.zero_grad()
            self.manual_backward(loss)
            optimizer.step()
            self.untoggle_optimizer(optimizer)

    def configure_optimizers(self) -> Any:
        return self.optimizers_of_both()


def make_trainer(gan: str, call: str, out: Path) -> pl.Trainer:
    common: dict[str, Any] = {
        "max_epochs": 2,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "default_root_dir": str(out),
    }
    if gan == "2x":
        return pl.Trainer(
            accelerator="cpu", devices=2, strategy="ddp_find_unused_parameters_true", **common
        )
    from ddpkit.lightning import Trainer

    flags: dict[str, Any] = {
        "ddp_cpu": {"accelerator": "ddp_cpu", "num_processes": 2},
        "unused_false": {"num_processes": 2, "plugins": ["ddp_find_unused_parameters_false"]},
    }[call]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = Trainer(**flags, **common)
    if os.environ.get("LOCAL_RANK", "0") == "0":
        (out / "warnings.txt").write_text("\n".join(str(w.message) for w in caught))
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gan", choices=["1x", "2x"], required=True)
    parser.add_argument("--call", choices=["ddp_cpu", "unused_false"], default="ddp_cpu")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    pl.seed_everything(SEED)
    model = OneXGAN() if args.gan == "1x" else ManualGAN()
    trainer = make_trainer(args.gan, args.call, args.out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(model)
    if args.call == "unused_false" and trainer.global_rank == 0:
        (args.out / "fit_warnings.txt").write_text("\n".join(str(w.message) for w in caught))
    if trainer.global_rank != 0:
        return
    torch.save(
        {
            "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "global_step": trainer.global_step,
            "epoch_outputs": model.epoch_outputs,
            "automatic_optimization": model.automatic_optimization,
        },
        args.out / "result.pt",
    )


if __name__ == "__main__":
    main()
