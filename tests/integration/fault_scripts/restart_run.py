"""A 2-rank CPU fit with dropout whose rank 1 may be SIGKILLed mid-epoch, for the restart tests
and bench/reliability.py.

    python restart_run.py --launcher subprocess|spawn|torchrun --root DIR --out WEIGHTS
                          [--fault none|kill] [--rank R] [--max-restarts N]
                          [--kill-attempts K] [--no-checkpoint] [--lightning]
                          [--step-delay SECONDS] [--every-n-train-steps N] [--csv]
                          [--slow-teardown] [--save-on-exception]

``--fault kill``: rank R (1) kills itself (SIGKILL) at batch 2 of epoch 1 in each of the first K
attempts (1; the attempt is ``TORCHELASTIC_RESTART_COUNT``). Rank 0 writes the final weights to
WEIGHTS (``torch.save``). It speaks the fault harness's arguments and lines (harness.py).
Lines on stderr: ``ddpkit-fault: fault kill rank 1 at <time>`` just before the kill,
``ddpkit-fault: step <epoch> <batch> at <time>`` at each of rank 0's training steps.
``--launcher torchrun``: run under ``torchrun --nproc-per-node=2``, which starts the ranks.
``--lightning``: the same module as a LightningModule on ``ddpkit.lightning.Trainer``.
``--step-delay``: every rank sleeps that long at each step (the same weights, a longer run: time
for a test's observer to act while the job trains). ``--every-n-train-steps``: the checkpoints are
a ModelCheckpoint's, every N steps (within epochs), all kept. ``--csv``: each training step
logs its loss (and its epoch, batch) to ``ROOT/metrics.csv``, a row a step.
``--slow-teardown``: in an attempt whose rank is killed, rank 0's DDPPlugin takes a second before
its teardown: the supervisor's abort (rank 1 died) lands in that teardown, not in the stage.
``--save-on-exception``: the library's ``ModelCheckpoint(save_on_exception=True,
save_last=True)``: rank 0 saves alone at the failure (an ordinary file name, and last.ckpt).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
import ddpkit.callbacks
import ddpkit.loggers
import ddpkit.plugins

KILL_EPOCH, KILL_BATCH = 1, 2
EPOCHS = 3


def say(text: str) -> None:
    print(f"ddpkit-fault: {text}", file=sys.stderr, flush=True)


def attempt() -> int:
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


class Steps:
    """What both modules do at each step: rank 0 notes it, rank 1 dies where it is told."""

    kill_attempts = 0
    kill_rank = 1
    log_steps = False
    step_delay = 0.0

    def step_hook(self, epoch: int, batch_idx: int, rank: int) -> None:
        if rank == 0:
            say(f"step {epoch} {batch_idx} at {time.time():.6f}")
        if epoch == 0 and batch_idx == 0:
            say(f"rank {rank} pid {os.getpid()}")
        due = (epoch, batch_idx) == (KILL_EPOCH, KILL_BATCH)
        if rank == self.kill_rank and due and attempt() < self.kill_attempts:
            say(f"fault kill rank {rank} at {time.time():.6f}")
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.step_delay)


def network() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 2))


class Net(Steps, ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = network()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.step_hook(self.current_epoch, batch_idx, self.trainer.global_rank)
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        if self.log_steps:
            self.log_dict({"loss": loss, "batch": float(batch_idx)})
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=0.01)


class SlowTeardown(ddpkit.plugins.DDPPlugin):
    """A teardown that starts late in an attempt whose rank is killed: rank 0's collective
    fails at once (its peer is gone), and the supervisor's abort arrives while it tears down."""

    kill_attempts = 0

    def teardown(self) -> None:
        if self.global_rank == 0 and attempt() < self.kill_attempts:
            time.sleep(1.0)
        super().teardown()


def restarts(args: argparse.Namespace) -> dict[str, int]:
    """``max_restarts`` only when asked for (the script then runs on a ddpkit without it too)."""
    return {"max_restarts": args.max_restarts} if args.max_restarts else {}


def data() -> DataLoader[Any]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8, shuffle=True)


def ddpkit_fit(args: argparse.Namespace) -> tuple[nn.Module, bool]:
    launcher = None if args.launcher == "torchrun" else args.launcher
    every = args.every_n_train_steps
    checkpoints = (
        {"callbacks": [ddpkit.callbacks.ModelCheckpoint(every_n_train_steps=every, save_top_k=-1)]}
        if every
        else {}
    )
    if args.save_on_exception:
        saver = ddpkit.callbacks.ModelCheckpoint(save_on_exception=True, save_last=True)
        checkpoints = {"callbacks": [saver]}
    strategy: Any = {"subprocess": "ddp", "spawn": "ddp_spawn", None: "ddp"}[launcher]
    if args.slow_teardown:
        strategy = SlowTeardown()
        strategy.kill_attempts = args.kill_attempts
    trainer = ddpkit.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=strategy,
        max_epochs=EPOCHS,
        enable_checkpointing=not args.no_checkpoint,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=ddpkit.loggers.CSVLogger(args.root, name="", version="") if args.csv else False,
        log_every_n_steps=1,
        default_root_dir=args.root,
        **restarts(args),
        **checkpoints,
    )
    model = Net()
    model.kill_attempts, model.kill_rank = args.kill_attempts, args.rank
    model.log_steps = args.csv
    model.step_delay = args.step_delay
    trainer.fit(model, data())
    return model, trainer.is_global_zero


def saver_1x(args: argparse.Namespace) -> list[Any] | None:
    if not args.save_on_exception:
        return None
    from pytorch_lightning.callbacks import ModelCheckpoint

    return [ModelCheckpoint(save_on_exception=True, save_last=True)]


def lightning_fit(args: argparse.Namespace) -> tuple[nn.Module, bool]:
    from lightning_module import LitNet

    import ddpkit.lightning

    trainer = ddpkit.lightning.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp_spawn" if args.launcher == "spawn" else "ddp",
        supervise=args.launcher != "torchrun",  # ddpkit's launchers (torchrun: its own)
        max_epochs=EPOCHS,
        **restarts(args),
        enable_checkpointing=not args.no_checkpoint,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        default_root_dir=args.root,
        callbacks=saver_1x(args),
    )
    model = LitNet()
    model.kill_attempts, model.kill_rank = args.kill_attempts, args.rank
    model.step_delay = args.step_delay
    trainer.fit(model, data())
    return model, trainer.is_global_zero


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launcher", choices=["subprocess", "spawn", "torchrun"], required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--fault", choices=["none", "kill"], default="none")
    parser.add_argument("--rank", type=int, default=1)
    parser.add_argument("--max-restarts", type=int, default=0)
    parser.add_argument("--kill-attempts", type=int, default=1)
    parser.add_argument("--no-checkpoint", action="store_true")
    parser.add_argument("--lightning", action="store_true")
    parser.add_argument("--step-delay", type=float, default=0.0)
    parser.add_argument("--every-n-train-steps", type=int, default=0)
    parser.add_argument("--csv", action="store_true")
    parser.add_argument("--slow-teardown", action="store_true")
    parser.add_argument("--save-on-exception", action="store_true")
    args = parser.parse_args()
    if args.fault == "none":
        args.kill_attempts = 0
    ddpkit.seed_everything(0)
    model, zero = (lightning_fit if args.lightning else ddpkit_fit)(args)
    if zero:
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, args.out)
        say(f"finished pid {os.getpid()}")


if __name__ == "__main__":
    main()
