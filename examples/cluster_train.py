"""Train a tiny model a few steps under any launcher, and report what each rank saw.

The same script runs unchanged under every launcher; only the command in front of it changes:

    python examples/cluster_train.py --accelerator cpu --devices 2            # ddpkit starts 2
    torchrun --nproc-per-node=2 examples/cluster_train.py --accelerator ddp_cpu --num-processes 2
    srun --ntasks=2 python examples/cluster_train.py --accelerator cpu --devices 2
    # two machines, no scheduler (see docs/launchers/multinode.md):
    MASTER_ADDR=node0 MASTER_PORT=29500 NODE_RANK=0 python examples/cluster_train.py \\
        --accelerator cpu --devices 2 --num-nodes 2

With ``--report-dir DIR`` every rank writes ``DIR/rank<global rank>.json``: its ranks, the
environment ddpkit detected, a hash of its final weights (identical on every rank when DDP
worked), its process id, parent and children (to check who started whom).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import Trainer


class TinyRegressor(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def make_data(n: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, :1] * 2 - x[:, 1:2]).tanh()
    return TensorDataset(x, y)


def weights_hash(model: nn.Module) -> str:
    flat = torch.cat([p.detach().flatten().cpu() for p in model.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc): who this rank started itself."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--accelerator")
    parser.add_argument("--strategy")
    parser.add_argument("--devices", type=int)
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--num-nodes", type=int, default=1)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--report-dir", help="each rank writes rank<N>.json here")
    parser.add_argument("--root-dir", default="runs/cluster")
    args = parser.parse_args()

    flags: dict[str, Any] = {"num_nodes": args.num_nodes}
    for name in ("accelerator", "strategy", "devices", "num_processes"):
        if getattr(args, name) is not None:
            flags[name] = getattr(args, name)

    ddpkit.seed_everything(7)
    trainer = Trainer(
        **flags,
        max_steps=args.steps,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        default_root_dir=args.root_dir,
        enable_progress_bar=False,
        enable_checkpointing=False,
        logger=False,
    )
    if trainer.is_global_zero:
        print(trainer.accelerator_connector.explain(), flush=True)
    model = TinyRegressor()
    before = weights_hash(model)
    trainer.fit(model, DataLoader(make_data(256), batch_size=16, shuffle=True))
    report = {
        "global_rank": trainer.global_rank,
        "local_rank": trainer.local_rank,
        "node_rank": trainer.node_rank,
        "world_size": trainer.world_size,
        "environment": type(trainer.cluster_environment).__name__,
        "launcher": trainer.accelerator_connector.plan.launcher.value,
        "global_step": trainer.global_step,
        "initial_weights": before,
        "weights": weights_hash(model),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "children": children_of(os.getpid()),
        "hostname": socket.gethostname(),
        "main_address": trainer.cluster_environment.main_address(),
        # What the launcher told this process (the variables ddpkit read its ranks from).
        "launcher_variables": {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith(("SLURM_", "SLURMD_", "TORCHELASTIC_"))
            or k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE")
            or k in ("NODE_RANK", "MASTER_ADDR", "MASTER_PORT")
        },
    }
    print(
        f"rank {trainer.global_rank}/{trainer.world_size}: {report['environment']}, "
        f"node {report['node_rank']}, weights {report['weights']}",
        flush=True,
    )
    if args.report_dir:
        out = Path(args.report_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
