"""``fault_scripts/faulty_run.py`` for a Lightning module: a 2-rank CPU run with one injected
fault, on real Lightning 2.x, started and supervised by ddpkit — by default, as a 1.x script gets
it (``ddpkit.lightning.Trainer`` with 1.x device flags, no ddpkit keyword).

    python lit_faulty.py --launcher subprocess|spawn --fault raise|kill|stall|none|ok --rank R
                         [--stall-timeout S] [--spelling legacy|modern|lightning]

It prints the lines the fault-injection harness reads (``ddpkit-fault: rank R pid P`` when
training starts, ``ddpkit-fault: fault <name> rank R at <time>`` just before the fault,
``ddpkit-fault: ready rank R`` a few steps into ``--fault none``). ``--spelling``: ``legacy`` is
``ddpkit.lightning.Trainer(num_processes=2, plugins=[DDPPlugin(...)])`` (supervised by default),
``modern``
is ``pytorch_lightning.Trainer(accelerator="cpu", devices=2, strategy=SupervisedDDPStrategy(...))``,
``lightning`` is plain Lightning's own ``strategy="ddp"`` / ``"ddp_spawn"`` (no ddpkit), for
comparison.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any

import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

FAULT_STEP = 3


def say(text: str) -> None:
    print(f"ddpkit-fault: {text}", file=sys.stderr, flush=True)


class Faulty(pl.LightningModule):
    def __init__(self, fault: str, rank: int) -> None:
        super().__init__()
        self.net = nn.Linear(4, 2)
        self.fault = fault
        self.fault_rank = rank

    def on_fit_start(self) -> None:
        say(f"rank {self.global_rank} pid {os.getpid()}")

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        if batch_idx == FAULT_STEP and self.global_rank == self.fault_rank:
            self.inject()
        if self.fault == "none":
            time.sleep(0.05)  # keep the run going until the harness signals it
        return nn.functional.cross_entropy(self.net(x), y)

    def inject(self) -> None:
        if self.fault in ("none", "ok"):
            say(f"ready rank {self.fault_rank}")
            return
        say(f"fault {self.fault} rank {self.fault_rank} at {time.time():.6f}")
        if self.fault == "raise":
            raise RuntimeError(f"injected fault on rank {self.fault_rank}")
        if self.fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fault == "stall":
            while True:  # stuck before the next collective, holding the GIL like real code
                sum(range(1000))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def make_trainer(launcher: str, spelling: str, timeout: float | None, epochs: int) -> pl.Trainer:
    common: dict[str, Any] = {
        "max_epochs": epochs,
        "enable_progress_bar": False,
        "enable_checkpointing": False,
        "enable_model_summary": False,
        "logger": False,
        "num_sanity_val_steps": 0,
    }
    start_method = "popen" if launcher == "subprocess" else "spawn"
    if spelling == "lightning":
        strategy = "ddp" if launcher == "subprocess" else "ddp_spawn"
        return pl.Trainer(accelerator="cpu", devices=2, strategy=strategy, **common)
    if spelling == "modern":
        from ddpkit.lightning import SupervisedDDPStrategy

        strategy = SupervisedDDPStrategy(start_method=start_method, timeout=timeout)
        return pl.Trainer(accelerator="cpu", devices=2, strategy=strategy, **common)
    from ddpkit.lightning import DDPPlugin, DDPSpawnPlugin, Trainer

    plugin_type = DDPPlugin if launcher == "subprocess" else DDPSpawnPlugin
    plugin = plugin_type(timeout=timeout)
    return Trainer(num_processes=2, plugins=[plugin], **common)  # supervised: ddpkit's default


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launcher", choices=["subprocess", "spawn"], required=True)
    parser.add_argument("--fault", choices=["raise", "kill", "stall", "none", "ok"], required=True)
    parser.add_argument("--rank", type=int, default=1)
    parser.add_argument("--stall-timeout", type=float, default=None)
    parser.add_argument("--spelling", choices=["legacy", "modern", "lightning"], default="legacy")
    args = parser.parse_args()
    epochs = 1 if args.fault != "none" else 1000
    trainer = make_trainer(args.launcher, args.spelling, args.stall_timeout, epochs)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    trainer.fit(Faulty(args.fault, args.rank), DataLoader(data, batch_size=4))
    say(f"finished pid {os.getpid()} global_step {trainer.global_step}")


if __name__ == "__main__":
    main()
