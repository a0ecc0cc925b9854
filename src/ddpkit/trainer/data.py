"""Data loaders in DDP: each rank gets its own shard through a ``DistributedSampler``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

from ddpkit.errors import MisconfigurationError

__all__ = ["ShardSampler", "distribute", "move_to_device", "num_batches"]

_LOADER_ARGS = (
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
    "prefetch_factor",
    "persistent_workers",
    "pin_memory_device",
    "in_order",
)


class ShardSampler(Sampler[int]):
    """Indices ``rank, rank + world, ...``: disjoint shards with no padding, for ``predict``
    (a ``DistributedSampler`` repeats samples to even out the shards)."""

    def __init__(self, length: int, rank: int, world_size: int) -> None:
        self.length, self.rank, self.world_size = length, rank, world_size

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.length, self.world_size))

    def __len__(self) -> int:
        return len(range(self.rank, self.length, self.world_size))


def distribute(
    loader: DataLoader[Any],
    *,
    rank: int,
    world_size: int,
    train: bool,
    seed: int,
    predict: bool = False,
    use_distributed_sampler: bool = True,
) -> DataLoader[Any]:
    """The same loader with its sampler replaced by this rank's shard (a new DataLoader; the
    user's loader is left as it was)."""
    if world_size == 1 or not use_distributed_sampler:
        return loader
    if isinstance(loader.dataset, IterableDataset):
        return loader  # the dataset shards itself (it sees the rank through torch.distributed)
    sampler = loader.sampler
    if isinstance(sampler, DistributedSampler | ShardSampler):
        return loader
    batch_sampler = loader.batch_sampler
    if batch_sampler is not None and type(batch_sampler) is not BatchSampler:
        raise MisconfigurationError(
            f"DDP needs each rank to load its own shard, but this DataLoader uses a custom "
            f"batch_sampler ({type(batch_sampler).__name__}) that ddpkit cannot rebuild. Fix: "
            f"make it shard by rank (torch.distributed.get_rank()) and pass "
            f"Trainer(use_distributed_sampler=False)."
        )
    if not isinstance(sampler, RandomSampler | SequentialSampler):
        raise MisconfigurationError(
            f"DDP needs each rank to load its own shard, but this DataLoader uses a custom "
            f"sampler ({type(sampler).__name__}) that ddpkit cannot replace. Fix: wrap it so "
            f"it shards by rank, or use a DistributedSampler, and pass "
            f"Trainer(use_distributed_sampler=False)."
        )
    shuffle = train and isinstance(sampler, RandomSampler)
    new_sampler: Sampler[int]
    if predict:
        new_sampler = ShardSampler(len(loader.dataset), rank, world_size)  # type: ignore[arg-type]
    else:
        new_sampler = DistributedSampler(
            loader.dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed
        )
    kwargs = {k: getattr(loader, k) for k in _LOADER_ARGS if hasattr(loader, k)}
    if kwargs.get("num_workers", 0) == 0:
        kwargs.pop("prefetch_factor", None)
        kwargs.pop("persistent_workers", None)
    return DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=new_sampler, **kwargs)


def num_batches(loader: DataLoader[Any], limit: int | float | None) -> int | None:
    """How many batches one epoch runs: the loader's length cut by ``limit`` (int or fraction).
    ``None`` when the loader has no length and no int limit."""
    try:
        total: int | None = len(loader)
    except TypeError:
        total = None
    if limit is None:
        return total
    if isinstance(limit, bool):
        raise MisconfigurationError(f"limit_*_batches={limit!r}: pass an int or a fraction.")
    if isinstance(limit, int):
        return limit if total is None else min(limit, total)
    if not 0.0 <= limit <= 1.0:
        raise MisconfigurationError(
            f"limit_*_batches={limit!r}: a fraction must lie in [0, 1]; an int counts batches."
        )
    if total is None:
        raise MisconfigurationError(
            f"limit_*_batches={limit!r}: a fraction needs a loader with a length; pass an int."
        )
    return math.floor(total * limit) if limit < 1.0 else total


def move_to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True) if batch.device != device else batch
    if isinstance(batch, dict):
        return {k: move_to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(move_to_device(v, device) for v in batch))
    if isinstance(batch, list | tuple):
        return type(batch)(move_to_device(v, device) for v in batch)
    return batch
