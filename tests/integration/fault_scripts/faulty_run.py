"""A tiny 2-rank CPU training run with one injected fault (fault-injection tests, bench).

    python faulty_run.py --launcher subprocess|spawn --fault raise|kill|abort|stall|none|ok --rank R
                         [--stall-timeout S]

Every rank prints ``ddpkit-fault: rank R pid P`` when training starts. The faulting rank prints
``ddpkit-fault: fault <name> rank R at <time.time()>`` just before the fault, so a harness can
time the end from the fault. ``--fault none`` trains (slowly, rank R prints ``ready`` a few steps
in) until a signal ends it; ``--fault ok`` trains one short epoch and ends normally.
``--fault gil``: rank R is stuck in a C call that holds the GIL (its stall watchdog cannot run).
``--fault rank0_stage`` / ``children_stage``: after fit, only rank 0 / only the other ranks call
``validate`` (a stage the others never join).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import signal
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import DDPPlugin, DDPSpawnPlugin, Trainer

#: the batch at which the fault fires (a few steps in: the process group is up, DDP synced)
FAULT_STEP = 3


def say(text: str) -> None:
    print(f"ddpkit-fault: {text}", file=sys.stderr, flush=True)


class Faulty(ddpkit.Module):
    def __init__(self, fault: str, rank: int) -> None:
        super().__init__()
        self.net = nn.Linear(4, 2)
        self.fault = fault
        self.fault_rank = rank

    def on_fit_start(self) -> None:
        say(f"rank {self.trainer.global_rank} pid {os.getpid()}")

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        if batch_idx == FAULT_STEP and self.trainer.global_rank == self.fault_rank:
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
        if self.fault == "abort":
            # No core file where the test runs, whatever the user's `ulimit -c`.
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            os.abort()  # what a C++ std::terminate or a failed assert in a library does
        if self.fault == "stall":
            while True:  # stuck before the next collective, holding the GIL like real code
                sum(range(1000))
        if self.fault == "gil":
            # Stuck in a C call that holds the GIL: not even the rank's watchdog thread runs.
            ctypes.PyDLL(None).sleep(3600)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launcher", choices=["subprocess", "spawn"], required=True)
    parser.add_argument(
        "--fault",
        choices=[
            "raise",
            "kill",
            "abort",
            "stall",
            "gil",
            "none",
            "ok",
            "rank0_stage",
            "children_stage",
        ],
        required=True,
    )
    parser.add_argument("--rank", type=int, default=1)
    parser.add_argument("--stall-timeout", type=float, default=None)
    args = parser.parse_args()

    plugin_cls = DDPPlugin if args.launcher == "subprocess" else DDPSpawnPlugin
    plugin = plugin_cls(timeout=args.stall_timeout) if args.stall_timeout else plugin_cls()
    trainer = Trainer(
        accelerator="cpu",
        devices=2,
        strategy=plugin,
        max_epochs=1 if args.fault != "none" else 1000,
        enable_progress_bar=False,
        enable_checkpointing=False,
        logger=False,
        num_sanity_val_steps=0,
    )
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    model = Faulty(args.fault, args.rank)
    loader = DataLoader(data, batch_size=4)
    trainer.fit(model, loader)
    if (args.fault == "rank0_stage" and trainer.is_global_zero) or (
        args.fault == "children_stage" and not trainer.is_global_zero
    ):
        say(f"fault {args.fault} rank {trainer.global_rank} at {time.time():.6f}")
        trainer.validate(model, loader)
    say(f"finished pid {os.getpid()} global_step {trainer.global_step}")


if __name__ == "__main__":
    main()
