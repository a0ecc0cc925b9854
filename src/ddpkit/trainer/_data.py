"""Data loaders in DDP: each rank gets its own shard through a ``DistributedSampler``; where the
loaders come from (given, a DataModule, the module's hooks)."""

from __future__ import annotations

import functools
import inspect
import itertools
import math
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

from ddpkit.callbacks._dispatch import callback_hook, module_hook
from ddpkit.errors import MisconfigurationError, MisconfigurationRuntimeError
from ddpkit.trainer._loaders import index_sampler, rebuild_loader, user_batch_sampler
from ddpkit.utilities._reprs import safe_repr
from ddpkit.utilities._seed import ENV_SEED_WORKERS, worker_init_function


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
    """The same loader with its sampler replaced by this rank's shard: a new loader of the same
    class and options (a batch sampler of the user's rebuilt around the shard, as Lightning
    does); the user's loader is left as it was. ``overfit``: the same batches every epoch, so a
    shuffling training loader is rebuilt in order. With ``seed_everything(..., workers=True)``
    a loader with workers and no ``worker_init_fn`` gets Lightning's."""
    extra = _worker_init(loader, rank)
    # Lightning's: predict every sample, whatever drop_last the loader has
    rebuild = bool(extra) or _drops_last_to_predict(loader, predict)
    if rebuild and predict and user_batch_sampler(loader) is None:
        extra["drop_last"] = False
    inner = index_sampler(loader)
    if overfit and train and isinstance(inner, RandomSampler):
        in_order = SequentialSampler(loader.dataset)  # type: ignore[arg-type]
        loader, train, extra = rebuild_loader(loader, in_order, **extra), False, {}
        inner, rebuild = index_sampler(loader), False
    distributed = world_size > 1 and use_distributed_sampler
    if not distributed or isinstance(loader.dataset, IterableDataset):
        # an iterable dataset shards itself (it sees the rank through torch.distributed)
        same: Any = loader.sampler
        return rebuild_loader(loader, same, predict=predict, **extra) if rebuild else loader
    if isinstance(inner, DistributedSampler | ShardSampler):
        return rebuild_loader(loader, inner, predict=predict, **extra) if rebuild else loader
    if inner is None or not isinstance(inner, RandomSampler | SequentialSampler):
        where = " in its batch_sampler" if user_batch_sampler(loader) is not None else ""
        raise MisconfigurationError(
            f"DDP needs each rank to load its own shard, but this DataLoader uses a custom "
            f"sampler ({type(inner).__name__}){where} that ddpkit cannot replace. Fix: "
            f"wrap it so it shards by rank, or use a DistributedSampler, and pass "
            f"Trainer(use_distributed_sampler=False)."
        )
    # Lightning's: a training shard is shuffled whatever the loader said (its sampler's seed,
    # the same on every rank, changes with set_epoch); evaluation shards keep the order.
    shuffle = train and not overfit
    new_sampler: Sampler[int]
    if predict:
        new_sampler = ShardSampler(len(loader.dataset), rank, world_size)  # type: ignore[arg-type]
    else:
        new_sampler = DistributedSampler(
            loader.dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed
        )
    return rebuild_loader(loader, new_sampler, predict=predict, **extra)


def _drops_last_to_predict(loader: DataLoader[Any], predict: bool) -> bool:
    """A predict loader whose batches drop the last, smaller one."""
    if not predict or isinstance(loader.dataset, IterableDataset):
        return False
    return bool(getattr(loader.batch_sampler, "drop_last", False))


def _worker_init(loader: DataLoader[Any], rank: int) -> dict[str, Any]:
    """Lightning's ``worker_init_fn`` for a loader with workers and none of its own, after
    ``seed_everything(..., workers=True)`` (which sets ``PL_SEED_WORKERS=1``)."""
    if os.environ.get(ENV_SEED_WORKERS, "0") != "1":
        return {}
    if loader.num_workers == 0 or loader.worker_init_fn is not None:
        return {}
    return {"worker_init_fn": functools.partial(worker_init_function, rank=rank)}


def set_sampler_epoch(loader: Any, epoch: int) -> None:
    """``set_epoch`` on the loader's sampler and its batch sampler's (a different shuffle every
    epoch, the same on every rank)."""
    samplers = [getattr(loader, "sampler", None)]
    samplers.append(getattr(getattr(loader, "batch_sampler", None), "sampler", None))
    for sampler in {id(s): s for s in samplers if s is not None}.values():
        set_epoch = getattr(sampler, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)


def num_batches(loader: DataLoader[Any], limit: int | float | None, kind: str = "*") -> int | None:
    """How many batches one epoch runs: the loader's length cut by ``limit`` (int or fraction).
    ``None`` when the loader has no length and no int limit. ``kind``: the loader's
    ("train", "val", "test", "predict"), named in a refusal."""
    try:
        total: int | None = len(loader)
    except TypeError:
        total = None
    if limit is None or (type(limit) is float and limit == 1.0):
        return total
    if isinstance(limit, bool):
        raise MisconfigurationError(
            f"limit_*_batches={safe_repr(limit)}: pass an int or a fraction."
        )
    if isinstance(limit, int):
        return limit if total is None else min(limit, total)
    if not 0.0 <= limit <= 1.0:
        raise MisconfigurationError(
            f"limit_*_batches={safe_repr(limit)}: a fraction must lie in [0, 1]; an int counts "
            "batches."
        )
    if total is None:
        raise MisconfigurationError(
            f"limit_*_batches={safe_repr(limit)}: a fraction needs a loader with a length; pass "
            "an int."
        )
    found = math.floor(total * limit) if limit < 1.0 else total
    if found == 0 and limit > 0.0 and total > 0:  # Lightning's refusal: a fraction under a batch
        raise MisconfigurationError(
            f"You requested to check {limit} of the `{kind}_dataloader` but {limit} * {total} < "
            f"1. Please increase the `limit_{kind}_batches` argument. Try at least "
            f"`limit_{kind}_batches={1.0 / total}`"
        )
    return found


#: the hook that gives each stage's loader
LOADER_HOOKS = {
    "train": "train_dataloader",
    "validate": "val_dataloader",
    "test": "test_dataloader",
    "predict": "predict_dataloader",
}


def find_loader(stage: str, given: Any, datamodule: Any, model: Any) -> Any:
    """The loader of ``stage`` ("train", "validate", "test", "predict"): the one given, else the
    DataModule's hook, else the module's; None when there is none."""
    if given is not None:
        return one_loader(stage, given)
    name = LOADER_HOOKS[stage]
    for source in (datamodule, model):
        if source is None:
            continue
        hook = module_hook(source, name)
        if hook is not None:
            return one_loader(stage, hook(), f"{type(source).__name__}.{name}()")
    return None


def one_loader(stage: str, found: Any, where: str | None = None) -> Any:
    """``found`` when it is one loader; several (a list, tuple or dict of loaders, which
    Lightning runs with a ``dataloader_idx``) are refused, naming a fix."""
    if not isinstance(found, list | tuple | dict):
        return found
    what = f"{where} returned" if where else f"the {stage} data given is"
    raise MisconfigurationError(
        f"{what} {len(found)} loaders in a {type(found).__name__}: ddpkit.Trainer "
        f"runs one loader a stage (Lightning's several, with dataloader_idx, are not "
        f"supported). Fix: one loader (torch.utils.data.ConcatDataset joins datasets), or run "
        f"a pytorch_lightning.LightningModule on ddpkit.lightning.Trainer."
    )


#: the hooks Lightning passes ``dataloader_idx`` to when a stage has several loaders
_INDEXED_HOOKS = {
    "val": ("validation_step", "on_validation_batch_start", "on_validation_batch_end"),
    "test": ("test_step", "on_test_batch_start", "on_test_batch_end"),
    "predict": ("predict_step", "on_predict_batch_start", "on_predict_batch_end"),
    "train": ("on_train_batch_start", "on_train_batch_end"),  # 1.0–1.4 passed it here too
}


def check_no_dataloader_idx(model: Any, callbacks: Iterable[Any]) -> None:
    """A hook that requires ``dataloader_idx``: with one loader a stage ddpkit never passes it,
    so the call would fail mid-run. Refused before any rank starts, in Lightning 2.x's words
    (``_verify_dataloader_idx_requirement``, a RuntimeError)."""
    found = [(model, module_hook), *((c, callback_hook) for c in callbacks)]
    for obj, hook_of in found:
        for prefix, hooks in _INDEXED_HOOKS.items():
            for name in hooks:
                hook = hook_of(obj, name)
                try:
                    params = inspect.signature(hook).parameters if hook is not None else {}
                except (TypeError, ValueError):
                    continue
                index = params.get("dataloader_idx")
                if index is not None and index.default is inspect.Parameter.empty:
                    raise MisconfigurationRuntimeError(
                        f"You provided only a single `{prefix}_dataloader`, but have included "
                        f"`dataloader_idx` in `{type(obj).__name__}.{name}()`. Either remove the "
                        f"argument or give it a default value i.e. `dataloader_idx=0` "
                        f"(ddpkit.Trainer runs one loader a stage, and never passes it)."
                    )


def no_data(fn: str) -> MisconfigurationError:
    """The refusal of a stage without data: no loader given, and no hook that gives one."""
    train, given = ("training ", "train_dataloaders") if fn == "fit" else ("", "dataloaders")
    return MisconfigurationError(
        f"Trainer.{fn}: no {train}data. Pass {given}=..., a datamodule=..., "
        f"or implement {LOADER_HOOKS['train' if fn == 'fit' else fn]}() on the module."
    )


def epoch_batches(
    loader: Any, n: int | None, skip: int = 0, then: Callable[[], None] | None = None
) -> Iterator[tuple[int, Any, bool]]:
    """``(batch_idx, batch, is_last)`` for the epoch's batches, the first ``skip`` of them read
    and left out (``then`` runs after them). With a known count the last is the n-th; without
    one, the loader is read one batch ahead to know it."""
    if skip:
        waiting = then
        for batch_idx, batch, last in epoch_batches(loader, n):
            if batch_idx < skip:
                continue
            if waiting is not None:
                waiting()
                waiting = None
            yield batch_idx, batch, last
        if waiting is not None:
            waiting()
        return
    if n is not None:
        if n <= 0:
            return
        # Stop at the n-th batch without asking the loader again, as Lightning does (islice
        # does not): a sampler asked past its end can draw from its generator (RandomSampler
        # draws one more permutation), and the next epochs' order would differ.
        for batch_idx, batch in enumerate(itertools.islice(loader, n)):
            yield batch_idx, batch, batch_idx + 1 == n
        return
    iterator, end = iter(loader), object()
    ahead, batch_idx = next(iterator, end), 0
    while ahead is not end:
        following = next(iterator, end)
        yield batch_idx, ahead, following is end
        ahead, batch_idx = following, batch_idx + 1


class TrainLoader:
    """The fit's training loader, made when first asked for: by the loop, or before it by
    ``estimated_stepping_batches`` (in ``configure_optimizers``), and the loop then takes that
    one. Asked again (``reload_dataloaders_every_n_epochs``), it makes a new one."""

    def __init__(self, make: Callable[[], Any], limit: int | float | None) -> None:
        self._make, self._limit = make, limit
        self._early: list[Any] = []

    def __call__(self) -> Any:
        return self._early.pop() if self._early else self._make()

    def batches(self) -> int | float:
        """Its number of batches on this rank (``inf`` without a length)."""
        if not self._early:
            self._early.append(self._make())
        n = num_batches(self._early[0], self._limit, "train")
        return math.inf if n is None else n
