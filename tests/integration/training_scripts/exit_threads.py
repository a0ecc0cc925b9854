"""A 2-rank ddpkit fit (DDP, an optimizer) as a user's script, whose every rank names, at its
very end (its first atexit handler, after ddpkit's teardown), the native threads it still has:
``exit-threads: rank R: NAMES`` (``-`` for none besides the main one), read from
``/proc/self/task/*/comm``.

    python exit_threads.py ddp          # ddpkit's subprocess launcher re-runs it for rank 1
    python exit_threads.py ddp_spawn    # both ranks spawned; this process only waits
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit


def native_threads() -> list[str]:
    """Every thread of this process but the calling one, by its kernel name."""
    me = threading.get_native_id()
    names = []
    for task in Path("/proc/self/task").iterdir():
        if int(task.name) != me:
            names.append((task / "comm").read_text().strip())
    return sorted(names)


def report(rank: int) -> None:
    # One write of the whole line: both ranks share the pipe, and print() writes the newline apart.
    line = f"exit-threads: rank {rank}: {' '.join(native_threads()) or '-'}\n"
    os.write(sys.stderr.fileno(), line.encode())


class Net(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 1)

    def on_fit_start(self) -> None:
        # Registered in the rank (spawned ranks too), after every handler of the imports: it
        # runs first at exit, once the trainer's teardown has destroyed the group.
        atexit.register(report, self.global_rank)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    trainer = ddpkit.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=sys.argv[1],
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Net(), data)


if __name__ == "__main__":
    main()
