"""Data loaders in DDP: each rank gets its own shard through a ``DistributedSampler``; where the
loaders come from (given, a DataModule, the module's hooks)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

from ddpkit.callbacks.dispatch import module_hook
from ddpkit.core.batch import move_to_device
from ddpkit.errors import MisconfigurationError

__all__ = [
    "ShardSampler",
    "distribute",
    "find_loader",
    "loader_hook",
    "move_to_device",
    "num_batches",
]

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
    """One contiguous block of indices per rank, with no padding, for ``predict`` (a
    ``DistributedSampler`` repeats samples to even out the shards). Blocks differ in size by one
    at most; rank zero's comes first, so the ranks' batches, one rank after another, are the
    dataset in its order."""

    def __init__(self, length: int, rank: int, world_size: int) -> None:
        self.length, self.rank, self.world_size = length, rank, world_size
        base, extra = divmod(length, world_size)
        self.start = rank * base + min(rank, extra)
        self.stop = self.start + base + (1 if rank < extra else 0)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.stop))

    def __len__(self) -> int:
        return self.stop - self.start


def distribute(
    loader: DataLoader[Any],
    *,
    rank: int,
    world_size: int,
    train: bool,
    seed: int,
    predict: bool = False,
    use_distributed_sampler: bool = True,
    overfit: bool = False,
) -> DataLoader[Any]:
    """The same loader with its sampler replaced by this rank's shard (a new DataLoader; the
    user's loader is left as it was). ``overfit``: the same batches every epoch, so a shuffling
    training loader is rebuilt in order."""
    if overfit and train and isinstance(getattr(loader, "sampler", None), RandomSampler):
        loader = _rebuilt(loader, SequentialSampler(loader.dataset))  # type: ignore[arg-type]
        train = False
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
    return _rebuilt(loader, new_sampler)


def _rebuilt(loader: DataLoader[Any], sampler: Sampler[int]) -> DataLoader[Any]:
    kwargs = {k: getattr(loader, k) for k in _LOADER_ARGS if hasattr(loader, k)}
    if kwargs.get("num_workers", 0) == 0:
        kwargs.pop("prefetch_factor", None)
        kwargs.pop("persistent_workers", None)
    return DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=sampler, **kwargs)


def num_batches(loader: DataLoader[Any], limit: int | float | None) -> int | None:
    """How many batches one epoch runs: the loader's length cut by ``limit`` (int or fraction).
    ``None`` when the loader has no length and no int limit."""
    try:
        total: int | None = len(loader)
    except TypeError:
        total = None
    if limit is None or (type(limit) is float and limit == 1.0):
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


_LOADER_HOOKS = {
    "train": "train_dataloader",
    "validate": "val_dataloader",
    "test": "test_dataloader",
    "predict": "predict_dataloader",
}


def find_loader(stage: str, given: Any, datamodule: Any, model: Any) -> Any:
    """The loader of ``stage`` ("train", "validate", "test", "predict"): the one given, else the
    DataModule's hook, else the module's; None when there is none."""
    if given is not None:
        return given
    name = _LOADER_HOOKS[stage]
    for source in (datamodule, model):
        if source is None:
            continue
        hook = module_hook(source, name)
        if hook is not None:
            return hook()
    return None


def loader_hook(stage: str) -> str:
    """The hook that gives ``stage``'s loader (for messages)."""
    return _LOADER_HOOKS[stage]
