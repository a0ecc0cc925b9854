"""A tiny regression problem, the ddpkit module that trains on it, and the references.

The references are what a user would write by hand, from the same seed and data:

* :func:`hand_written_ddp` — a real ``torch.nn.parallel.DistributedDataParallel`` loop over
  gloo with a ``DistributedSampler``, run by every rank of a ``@pytest.mark.distributed`` test;
* :func:`simulate_ddp` — the same training in one process: each step averages the gradients of
  every rank's shard, which is exactly what DDP's all-reduce computes. It costs no processes, so
  the tests compare every ddpkit run against it, and one test checks it against the real loop.

Every rank of a ddpkit run writes what the tests need (weights, losses, the sample indices it
saw, its metrics) to ``<out_dir>/<tag>-rank<R>.pt`` at ``on_fit_end``; the test's rank zero
compares the files once all ranks wrote theirs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn import functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import ddpkit
from ddpkit import DDPPlugin

N_SAMPLES = 64
BATCH = 8
LR = 0.05
MOMENTUM = 0.9
INIT_SEED = 11
DATA_SEED = 5
#: the DistributedSampler's shuffle seed; ddpkit takes it from seed_everything (DDPKIT_SEED)
SAMPLER_SEED = 3


def make_dataset(n: int = N_SAMPLES, seed: int = DATA_SEED) -> TensorDataset:
    """``(x, y, index)`` rows: the index tells which samples each rank saw."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    w = torch.tensor([[1.5], [-2.0], [0.5], [1.0]])
    y = torch.tanh(x @ w) + 0.05 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y, torch.arange(n))


def make_net(seed: int = INIT_SEED) -> nn.Sequential:
    """The same initial weights in every process, independent of the global RNG."""
    g = torch.Generator().manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return net


def make_optimizer(params: Any) -> torch.optim.Optimizer:
    # Momentum gives the optimizer a state: a resumed run that lost it would drift.
    return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)


def loss_of(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(net(x), y)


def save_atomically(obj: Any, path: Path) -> None:
    """Readers polling for ``path`` never see half a file."""
    part = path.with_name(path.name + ".part")
    torch.save(obj, part)
    os.replace(part, path)


def wait_for(path: Path, timeout: float = 90.0) -> dict[str, Any]:
    """Load a rank's result file once it exists (bounded)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            present = sorted(p.name for p in path.parent.iterdir())
            raise AssertionError(f"{path.name} never appeared; {path.parent} holds {present}")
        time.sleep(0.1)
    data: dict[str, Any] = torch.load(path, weights_only=True)
    return data


class Regressor(ddpkit.Module):
    """Records its losses, global steps and sample indices; logs rank-dependent metrics with and
    without ``sync_dist``; writes all of it with its final weights at the end of fit."""

    def __init__(self, out_dir: str | os.PathLike[str] | None = None, tag: str = "run") -> None:
        super().__init__()
        self.net = make_net()
        self.out_dir = str(out_dir) if out_dir is not None else None
        self.tag = tag
        self.record: dict[str, Any] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def on_fit_start(self) -> None:
        self.record = {"losses": [], "steps": [], "epochs": [], "indices": {}}

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y, idx = batch
        loss = loss_of(self, x, y)
        trainer = self.trainer
        self.record["losses"].append(loss.detach().item())
        self.record["steps"].append(trainer.global_step)
        self.record["epochs"].append(trainer.current_epoch)
        self.record["indices"].setdefault(trainer.current_epoch, []).extend(idx.tolist())
        rank = float(self.global_rank)
        self.log("train_loss", loss, on_step=True, on_epoch=True, sync_dist=True)
        self.log("rank_mean", rank, on_step=False, on_epoch=True, sync_dist=True)
        self.log("rank_max", rank, on_step=False, on_epoch=True, sync_dist=True, reduce_fx="max")
        self.log("rank_local", rank, on_step=False, on_epoch=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return make_optimizer(self.parameters())

    def on_fit_end(self) -> None:
        if self.out_dir is None:
            return
        trainer = self.trainer
        result = {
            "rank": trainer.global_rank,
            "world_size": trainer.world_size,
            "pid": os.getpid(),
            "threads": torch.get_num_threads(),
            "state_dict": {k: v.detach().cpu().clone() for k, v in self.state_dict().items()},
            "record": self.record,
            "callback_metrics": {k: float(v) for k, v in trainer.callback_metrics.items()},
            "global_step": trainer.global_step,
            "current_epoch": trainer.current_epoch,
            "allreduces": getattr(trainer.strategy, "allreduces", None),
        }
        save_atomically(result, Path(self.out_dir) / f"{self.tag}-rank{trainer.global_rank}.pt")


def _counting_allreduce(plugin, bucket):  # type: ignore[no-untyped-def]
    # No annotations: DDP checks a hook's annotations at runtime, and under
    # `from __future__ import annotations` they are strings it refuses.
    plugin.allreduces += 1
    return default_hooks.allreduce_hook(None, bucket)  # type: ignore[arg-type]


class CountingDDPPlugin(DDPPlugin):
    """``DDPPlugin`` whose model counts its gradient all-reduces: a DDP communication hook that
    counts, then runs DDP's own default all-reduce. The tiny model fits in one bucket, so one
    synchronized backward is one count."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.allreduces = 0

    def wrap_model(self, model: nn.Module) -> nn.Module:
        ddp = super().wrap_model(model)
        assert isinstance(ddp, nn.parallel.DistributedDataParallel)
        self.allreduces = 0
        ddp.register_comm_hook(self, _counting_allreduce)
        return ddp


def shard_indices(
    n: int, world_size: int, epoch: int, seed: int = SAMPLER_SEED, shuffle: bool = True
) -> list[list[int]]:
    """Each rank's sample indices for one epoch, as ``DistributedSampler`` deals them."""
    shards = []
    for rank in range(world_size):
        sampler = DistributedSampler(
            range(n),  # type: ignore[arg-type]  # only its length is used
            num_replicas=world_size,
            rank=rank,
            shuffle=shuffle,
            seed=seed,
        )
        sampler.set_epoch(epoch)
        shards.append(list(sampler))
    return shards


def simulate_ddp(
    *,
    epochs: int,
    world_size: int = 2,
    batch_size: int = BATCH,
    accumulate: int = 1,
    seed: int = SAMPLER_SEED,
    shuffle: bool = True,
) -> dict[str, torch.Tensor]:
    """The final weights of ``world_size``-rank DDP training, computed in one process: every
    optimizer step uses the mean over ranks of each rank's (accumulated) gradient."""
    x_all, y_all, _ = make_dataset().tensors
    net = make_net()
    params = list(net.parameters())
    opt = make_optimizer(params)
    for epoch in range(epochs):
        shards = shard_indices(len(x_all), world_size, epoch, seed, shuffle)
        batches = [
            [shard[i : i + batch_size] for i in range(0, len(shard), batch_size)]
            for shard in shards
        ]
        n = len(batches[0])
        pending = [torch.zeros_like(p) for p in params]
        for b in range(n):
            for rank in range(world_size):
                idx = torch.tensor(batches[rank][b])
                loss = loss_of(net, x_all[idx], y_all[idx]) / accumulate
                for acc, g in zip(pending, torch.autograd.grad(loss, params), strict=True):
                    acc += g
            if (b + 1) % accumulate == 0 or b + 1 == n:
                for p, acc in zip(params, pending, strict=True):
                    p.grad = acc / world_size
                opt.step()
                opt.zero_grad(set_to_none=True)
                pending = [torch.zeros_like(p) for p in params]
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def hand_written_ddp(*, epochs: int) -> dict[str, torch.Tensor]:
    """The DDP loop a user writes by hand, run in every rank of an initialized process group;
    returns the final weights."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dataset = make_dataset()
    sampler = DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=SAMPLER_SEED
    )
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler)
    model = nn.parallel.DistributedDataParallel(make_net())
    opt = make_optimizer(model.parameters())
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y, _ in loader:
            opt.zero_grad(set_to_none=True)
            loss_of(model, x, y).backward()
            opt.step()
    return {k: v.detach().clone() for k, v in model.module.state_dict().items()}
