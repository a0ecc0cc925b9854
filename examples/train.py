"""Train a small classifier on two interleaved spirals, on 2 CPU processes by default.

    python examples/train.py                          # default (subprocess): accelerator="ddp_cpu",
                                                      #   num_processes=2, plugins=[DDPPlugin(...)]
    python examples/train.py --variant spawn          # the same with DDPSpawnPlugin: spawned ranks
    python examples/train.py --variant legacy         # accelerator="ddp_cpu" alone: spawn, and its
                                                      #   deprecation warning
    python examples/train.py --variant num_processes  # num_processes=2, plugins=[DDPPlugin()]
    python examples/train.py --variant modern         # accelerator="cpu", devices=2
    python examples/train.py --variant single         # accelerator="cpu", devices=1: one process

It prints the plan; the Trainer prints one line per epoch as each epoch ends when its output is
a log (rank 0's metrics, averaged over the ranks; in a terminal a progress bar runs during each
epoch and stays as that epoch's summary line); then the path of a picture (the spirals with the
decision boundary the model learned, and the loss and accuracy of every epoch) and the
Trainer's summary of the fit: epochs, steps, time, the checkpoint and the logs.
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


#: What the curves show, and the logged name it comes from (a value logged
#: both per step and per epoch is stored as <name>_step and <name>_epoch).
EPOCH_METRICS = {
    "train_loss": "train_loss_epoch",
    "train_acc": "train_acc",
    "val_loss": "val_loss",
    "val_acc": "val_acc",
}


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
        #: One dict of metrics per epoch, for the picture's curves.
        self.history: list[dict[str, float]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=True, sync_dist=True)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("train_acc", acc, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), sync_dist=True)

    def on_train_epoch_end(self) -> None:
        # Called on every rank after the epoch's validation; the values were averaged over the
        # ranks (sync_dist=True), so each rank holds the same numbers. (The Trainer prints the
        # epoch's line itself when the output is a log.)
        m = self.trainer.callback_metrics
        self.history.append({name: float(m[key]) for name, key in EPOCH_METRICS.items()})

    def on_fit_end(self) -> None:
        # Rank 0 draws: it holds the trained weights and the history in every variant (with
        # spawn, this process is a spawned rank and the script's own process only waits).
        if self.trainer.is_global_zero and self.history:
            print(picture_line(self, Path(self.trainer.default_root_dir)), flush=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


VARIANTS: dict[str, Callable[[], dict[str, Any]]] = {
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


def positive(flag: str, example: int) -> Callable[[str], int]:
    """An argparse type: a whole number ≥ 1, or a message that says what to pass instead."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a whole number ≥ 1. Fix: for instance {flag} {example}"
            )
        return value

    return parse


def variant(text: str) -> str:
    """An argparse type: a name of VARIANTS, or a did-you-mean and the choices."""
    if text in VARIANTS:
        return text
    names = ", ".join(VARIANTS)
    close = difflib.get_close_matches(text, VARIANTS, n=1)
    fix = f"did you mean --variant {close[0]}? (one of {names})" if close else f"one of {names}"
    raise argparse.ArgumentTypeError(f"{text!r} is not a variant. Fix: {fix}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="examples/train.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--variant",
        type=variant,
        default="subprocess",
        metavar="NAME",
        help=f"the Trainer call: {', '.join(VARIANTS)} (default: subprocess; see above)",
    )
    parser.add_argument(
        "--epochs", type=positive("--epochs", 5), default=5, metavar="N", help="default: 5"
    )
    parser.add_argument(
        "--samples",
        type=positive("--samples", 4096),
        default=4096,
        metavar="N",
        help="training points, shared out among the ranks (default: 4096)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive("--batch-size", 64),
        default=64,
        metavar="N",
        help="per rank (default: 64)",
    )
    parser.add_argument(
        "--root-dir",
        default="runs/spirals",
        metavar="DIR",
        help="where metrics.csv, checkpoints/ and spirals.png go (default: runs/spirals)",
    )
    args = parser.parse_args(argv)
    if Path(args.root_dir).exists() and not Path(args.root_dir).is_dir():
        parser.error(
            f"--root-dir {args.root_dir}: that is a file, not a folder. "
            f"Fix: pass a folder, for instance --root-dir runs/spirals"
        )
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    ddpkit.seed_everything(7)
    with warnings.catch_warnings():
        # The plan printed below shows any deprecation as one of its lines: once is enough.
        warnings.simplefilter("ignore", ddpkit.DDPKitDeprecationWarning)
        trainer = Trainer(
            **VARIANTS[args.variant](), max_epochs=args.epochs, default_root_dir=args.root_dir
        )
    if trainer.is_global_zero:
        print(trainer.accelerator_connector.explain(), flush=True)
    model = SpiralClassifier()
    train = DataLoader(make_spirals(args.samples, seed=0), batch_size=args.batch_size, shuffle=True)
    val = DataLoader(make_spirals(1024, seed=1), batch_size=256)
    # Rank 0's Trainer ends fit with what it did: epochs, steps, time, checkpoint and logs.
    trainer.fit(model, train, val)


def picture_line(model: SpiralClassifier, root: Path) -> str:
    """Draw the picture into ``root``; say where it went, or why there is none."""
    path = root.resolve() / "spirals.png"
    try:
        draw(model, make_spirals(1024, seed=1), path)
    except ModuleNotFoundError as err:
        return (
            f"picture: not drawn, {err.name} is not installed. Fix: pip install {err.name} "
            f"(scripts/setup.sh installs it with ddpkit's examples extra)"
        )
    return f"picture: {path}"


def draw(model: SpiralClassifier, data: TensorDataset, path: Path) -> None:
    """The spirals with the learned decision boundary, and the per-epoch curves, as a PNG."""
    from matplotlib.figure import Figure  # no pyplot: no window, no global state
    from matplotlib.ticker import MaxNLocator

    x, y = data.tensors
    lo, hi = x.min(0).values - 0.1, x.max(0).values + 0.1
    gx, gy = torch.meshgrid(
        torch.linspace(float(lo[0]), float(hi[0]), 200),
        torch.linspace(float(lo[1]), float(hi[1]), 200),
        indexing="xy",
    )
    was_training = model.training
    model.eval()
    with torch.no_grad():
        grid = torch.stack([gx.flatten(), gy.flatten()], dim=1)
        p1 = model(grid).softmax(1)[:, 1].reshape(gx.shape)
    model.train(was_training)
    fig = Figure(figsize=(13, 4.2), layout="constrained")
    space, loss, acc = fig.subplots(1, 3, width_ratios=[1.2, 1, 1])
    space.contourf(gx, gy, p1, levels=20, cmap="RdBu_r", alpha=0.6, vmin=0, vmax=1)
    space.contour(gx, gy, p1, levels=[0.5], colors="k", linewidths=1.5)
    space.scatter(x[:, 0], x[:, 1], c=y, cmap="RdBu_r", s=6, edgecolors="none")
    space.set(title="learned decision boundary (black line: p = 0.5)", aspect="equal")
    epochs = range(1, len(model.history) + 1)
    for ax, metric, title in ((loss, "loss", "loss"), (acc, "acc", "accuracy")):
        for split in ("train", "val"):
            ax.plot(epochs, [h[f"{split}_{metric}"] for h in model.history], "o-", label=split)
        ax.set(xlabel="epoch", title=title)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend()
        ax.grid(alpha=0.3)
    last = model.history[-1]
    fig.suptitle(f"two spirals after {len(model.history)} epochs: val_acc {last['val_acc']:.3f}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, format="png", dpi=100)
        os.replace(tmp, path)  # atomically: a reader never sees half a picture
    finally:
        tmp.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
