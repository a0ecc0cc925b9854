"""Lightning's own spawn DDP through ``ddpkit.lightning.Trainer(supervise=False)``: a fit and a
test on two spawned ranks; each rank writes, at its exit, whether its process group was still
up (an ``atexit`` handler registered at import, so it runs after every one a stage registers).

    python lit_spawn_exit.py --out DIR     # DIR/exit-<pid>.json per spawned rank, result.pt
"""

from __future__ import annotations

import argparse
import atexit
import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

import ddpkit.lightning

OUT = os.environ.get("LIT_SPAWN_EXIT_OUT", "")


def report() -> None:
    if OUT and multiprocessing.parent_process() is not None:
        up = dist.is_available() and dist.is_initialized()
        Path(OUT, f"exit-{os.getpid()}.json").write_text(json.dumps({"group_up": up}))


atexit.register(report)


class Linear(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    os.environ["LIT_SPAWN_EXIT_OUT"] = out  # the spawned ranks read it at import
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    trainer = ddpkit.lightning.Trainer(
        accelerator="ddp_cpu",
        num_processes=2,
        supervise=False,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=out,
    )
    trainer.fit(Linear(), DataLoader(data, batch_size=4))
    tested = trainer.test(Linear(), DataLoader(data, batch_size=4), verbose=False)
    torch.save({"tested": tested}, Path(out, "result.pt"))


if __name__ == "__main__":
    main()
