"""Train a small classifier on data this script makes, with 2 CPU processes by default.

    python examples/train.py                       # ddp_cpu + DDPPlugin: subprocess DDP
    python examples/train.py --variant spawn       # ddp_cpu + DDPSpawnPlugin: spawned ranks
    python examples/train.py --variant legacy      # ddp_cpu alone (spawn, with its warning)
    python examples/train.py --variant modern      # accelerator="cpu", devices=2 (subprocess)
    python examples/train.py --variant single      # one process

It prints the plan, the per-epoch metrics and where the checkpoint went.
"""

from __future__ import annotations

import argparse
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import DDPPlugin, DDPSpawnPlugin, Trainer


def make_spirals(n: int, seed: int) -> TensorDataset:
    """Two interleaved spirals: not linearly separable, so the MLP has something to learn."""
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, generator=g) * 2 * math.pi
    label = torch.randint(0, 2, (n,), generator=g)
    sign = label.float() * 2 - 1
    x = torch.stack([t * torch.cos(t) * sign, t * torch.sin(t) * sign], dim=1) / 10
    x += 0.05 * torch.randn(x.shape, generator=g)
    return TensorDataset(x, label)


class SpiralClassifier(ddpkit.Module):
    def __init__(self, hidden: int = 64, lr: float = 0.03) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, 2),
        )
        self.lr = lr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


VARIANTS = {
    "subprocess": lambda: dict(
        accelerator="ddp_cpu",
        num_processes=2,
        plugins=[DDPPlugin(find_unused_parameters=False)],
    ),
    "spawn": lambda: dict(
        accelerator="ddp_cpu",
        num_processes=2,
        plugins=[DDPSpawnPlugin(find_unused_parameters=False)],
    ),
    "legacy": lambda: dict(accelerator="ddp_cpu", num_processes=2),
    "num_processes": lambda: dict(num_processes=2, plugins=[DDPPlugin()]),
    "modern": lambda: dict(accelerator="cpu", devices=2),
    "single": lambda: dict(accelerator="cpu", devices=1),
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="subprocess")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--root-dir", default="runs/spirals")
    args = parser.parse_args()

    ddpkit.seed_everything(7)
    trainer = Trainer(
        **VARIANTS[args.variant](),
        max_epochs=args.epochs,
        default_root_dir=args.root_dir,
        enable_progress_bar=False,
    )
    if trainer.is_global_zero:
        print(trainer.accelerator_connector.explain(), flush=True)
    model = SpiralClassifier()
    train = DataLoader(make_spirals(args.samples, seed=0), batch_size=args.batch_size, shuffle=True)
    val = DataLoader(make_spirals(1024, seed=1), batch_size=256)
    trainer.fit(model, train, val)
    if trainer.is_global_zero:
        for row in _epoch_rows(trainer):
            print(row, flush=True)
        m = trainer.callback_metrics
        print(
            f"done: {trainer.current_epoch} epochs, {trainer.global_step} steps on "
            f"{trainer.world_size} process(es); "
            f"train_loss_epoch={float(m['train_loss_epoch']):.4f} "
            f"val_loss={float(m['val_loss']):.4f} val_acc={float(m['val_acc']):.3f}; "
            f"checkpoint: {trainer.checkpoint_path}",
            flush=True,
        )


def _epoch_rows(trainer: Trainer) -> list[str]:
    import csv
    from pathlib import Path

    path = Path(trainer.default_root_dir) / "metrics.csv"
    if not path.exists():
        return []
    epochs: dict[str, dict[str, str]] = {}
    for row in csv.DictReader(path.open()):
        values = {k: v for k, v in row.items() if v and k not in ("epoch", "step")}
        if any(k.endswith("_epoch") or k.startswith("val_") for k in values):
            epochs.setdefault(row["epoch"], {"step": row["step"]}).update(values)
    rows = []
    for epoch, values in epochs.items():
        step = values.pop("step")
        shown = "  ".join(f"{k}={float(v):.4f}" for k, v in sorted(values.items()))
        rows.append(f"epoch {epoch} (step {step}): {shown}")
    return rows


if __name__ == "__main__":
    main()
