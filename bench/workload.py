"""What every contender trains: one model, one data set, one seed, one optimizer, N steps.

A runner takes a :class:`Workload` from :data:`WORKLOADS`, builds :func:`make_net` under
:data:`SEED`, feeds it :func:`make_loader` (shuffled by a seeded generator in one process, by a
``DistributedSampler`` with seed 0 in DDP, as Lightning and ddpkit do: every contender sees the same
batches in the same order, so their final losses match) and steps a :class:`TimedSGD`, which
stamps the end of every optimizer step. The same stamps, taken the same way, time every
contender; rank zero writes them with :func:`write_result` for the driver (``python -m bench``).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

__all__ = [
    "SEED",
    "WORKLOADS",
    "TimedSGD",
    "Workload",
    "make_loader",
    "make_net",
    "parse_args",
    "process_start_wall",
    "write_result",
]

SEED = 1234

#: Set by the driver right before it starts the process: the wall clock (``time.time()``).
T0_VARIABLE = "BENCH_T0"
#: Where rank zero writes its JSON result.
RESULT_VARIABLE = "BENCH_RESULT"
#: The device every contender trains on: "cpu" (the default) or "cuda" (``python -m bench --gpu``).
DEVICE_VARIABLE = "BENCH_DEVICE"


@dataclass(frozen=True)
class Workload:
    name: str
    in_features: int
    hidden: int  # 0: a single Linear(in_features, classes)
    layers: int  # hidden layers
    classes: int
    batch: int  # per rank
    steps: int  # optimizer steps per rank
    warmup: int  # steps left out of the steady-state figures


WORKLOADS = {
    # Compute matters: ~1 ms per step in one process here.
    "mlp": Workload("mlp", in_features=64, hidden=256, layers=2, classes=10, batch=64, steps=300,
                    warmup=75),
    # Per-step framework overhead dominates: one Linear(32, 2).
    "tiny": Workload("tiny", in_features=32, hidden=0, layers=0, classes=2, batch=32, steps=1000,
                     warmup=200),
}  # fmt: skip


def make_net(w: Workload) -> nn.Module:
    """The network, initialized from :data:`SEED` (call it after ``torch.manual_seed(SEED)``)."""
    if w.hidden == 0:
        return nn.Linear(w.in_features, w.classes)
    layers: list[nn.Module] = [nn.Linear(w.in_features, w.hidden), nn.ReLU()]
    for _ in range(w.layers - 1):
        layers += [nn.Linear(w.hidden, w.hidden), nn.ReLU()]
    layers.append(nn.Linear(w.hidden, w.classes))
    return nn.Sequential(*layers)


def make_dataset(w: Workload, world_size: int, steps: int) -> TensorDataset:
    """Exactly ``steps`` batches per rank: one epoch, no partial batch."""
    n = steps * w.batch * world_size
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(n, w.in_features, generator=g)
    y = torch.randint(0, w.classes, (n,), generator=g)
    return TensorDataset(x, y)


def make_loader(w: Workload, world_size: int, steps: int) -> DataLoader[Any]:
    """The loader a user writes. Frameworks shard it by rank; the raw DDP runner shards it with
    a ``DistributedSampler`` itself."""
    ds = make_dataset(w, world_size, steps)
    if world_size > 1:
        # The DistributedSampler that replaces the sampler shuffles with its own seed. (And a
        # torch.Generator in the loader breaks Lightning's ddp_spawn: torch 2.13 cannot rebuild
        # its state tensor from shared memory in the spawned rank.)
        return DataLoader(ds, batch_size=w.batch, shuffle=True)
    g = torch.Generator().manual_seed(SEED)
    return DataLoader(ds, batch_size=w.batch, shuffle=True, generator=g)


class TimedSGD(torch.optim.SGD):
    """SGD with momentum that stamps ``time.perf_counter()`` after every step (and the wall
    clock after the first): the same timer for every contender."""

    def __init__(self, params: Any) -> None:
        super().__init__(params, lr=0.01, momentum=0.9)
        self.stamps: list[float] = []
        self.first_step_wall: float | None = None

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        loss = super().step(closure)
        if self.param_groups[0]["params"][0].is_cuda:
            torch.cuda.synchronize()  # the step's kernels done: the stamp is the step's end
        self.stamps.append(time.perf_counter())
        if self.first_step_wall is None:
            self.first_step_wall = time.time()
        return loss


def process_start_wall() -> float:
    """When this process started (wall clock, from /proc; ~10 ms resolution)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return float("nan")


def counting_callback(base: type) -> type:
    """A user's callback with per-step hooks (counts batches and optimizer steps), built on
    ``base``: ddpkit's or Lightning's ``Callback``, so both runners measure the same one."""

    def on_train_batch_start(self: Any, trainer: Any, pl_module: Any, batch: Any, idx: int) -> None:
        self.batches += 1

    def on_before_optimizer_step(self: Any, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self.steps += 1

    def on_train_batch_end(
        self: Any, trainer: Any, pl_module: Any, outputs: Any, batch: Any, idx: int
    ) -> None:
        self.ends += 1

    def init(self: Any) -> None:
        self.batches = self.steps = self.ends = 0

    return type(
        "Counting",
        (base,),
        {
            "__init__": init,
            "on_train_batch_start": on_train_batch_start,
            "on_before_optimizer_step": on_before_optimizer_step,
            "on_train_batch_end": on_train_batch_end,
        },
    )


def write_result(
    *,
    contender: str,
    w: Workload,
    mode: str,
    features: str,
    world_size: int,
    steps: int,
    optimizer: TimedSGD,
    final_loss: float,
    import_s: float,
) -> None:
    """Rank zero: leave the figures for the driver (nothing when run by hand)."""
    path = os.environ.get(RESULT_VARIABLE)
    if not path:
        print(
            f"{contender}/{mode} {w.name}: {len(optimizer.stamps)} steps, "
            f"final loss {final_loss:.6f}"
        )
        return
    t0 = float(os.environ.get(T0_VARIABLE, "nan"))
    stamps = optimizer.stamps
    result = {
        "contender": contender,
        "workload": asdict(w),
        "mode": mode,
        "features": features,
        "world_size": world_size,
        "steps": steps,
        "steps_done": len(stamps),
        "t0": t0,
        "process_start": process_start_wall(),
        "first_step_wall": optimizer.first_step_wall,
        "step_dt": [b - a for a, b in itertools.pairwise(stamps)],
        "final_loss": final_loss,
        "import_s": import_s,
        "threads": torch.get_num_threads(),
    }
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps(result))
    os.replace(tmp, path)


def parse_args(argv: list[str] | None = None) -> Any:
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="mlp")
    p.add_argument("--mode", choices=("single", "ddp", "spawn", "forkserver"), default="single")
    p.add_argument("--features", choices=("off", "on", "callbacks"), default="off")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--root", default=None, help="where logs and checkpoints go (features on)")
    p.add_argument(
        "--device", choices=("cpu", "cuda"), default=os.environ.get(DEVICE_VARIABLE, "cpu")
    )
    args = p.parse_args(argv)
    base = WORKLOADS[args.workload]
    args.w = Workload(
        **{
            **asdict(base),
            "steps": args.steps or base.steps,
            "warmup": base.warmup if args.warmup is None else args.warmup,
        }
    )
    return args
