"""Rebuilding a user's loader with another sampler, as Lightning does
(``pytorch_lightning.utilities.data._update_dataloader``): the same class (a ``DataLoader``
subclass too), built again from its own attributes, and a batch sampler of the user's rebuilt
around the new sampler with its batch size and ``drop_last`` — a ``BatchSampler`` or a subclass
of it. What cannot be rebuilt is a :class:`~ddpkit.errors.MisconfigurationError` naming the way
out (shard it yourself and pass ``Trainer(use_distributed_sampler=False)``).
"""

from __future__ import annotations

import inspect
from typing import Any

from torch.utils.data import DataLoader, IterableDataset, Sampler

from ddpkit.errors import MisconfigurationError

_OUT = (
    "Fix: make it shard by rank (torch.distributed.get_rank()) and pass "
    "Trainer(use_distributed_sampler=False)."
)


def user_batch_sampler(loader: DataLoader[Any]) -> Any:
    """The batch sampler the user passed (``DataLoader(ds, batch_sampler=...)``), or None when
    the loader made its own from ``batch_size`` (then ``loader.batch_size`` is set)."""
    batch_sampler = loader.batch_sampler
    return batch_sampler if batch_sampler is not None and loader.batch_size is None else None


def index_sampler(loader: DataLoader[Any]) -> Any:
    """The sampler that orders the indices: the user's batch sampler's own, else the loader's."""
    batch_sampler = user_batch_sampler(loader)
    if batch_sampler is not None:
        return getattr(batch_sampler, "sampler", None)
    return loader.sampler


def _batch_sampler_around(batch_sampler: Any, sampler: Sampler[int], predict: bool) -> Any:
    """``type(batch_sampler)(sampler, batch_size=..., drop_last=...)`` (Lightning's rule for a
    batch sampler whose arguments it did not capture); ``drop_last=False`` to predict."""
    kind = type(batch_sampler)
    if not (hasattr(batch_sampler, "batch_size") and hasattr(batch_sampler, "drop_last")):
        raise MisconfigurationError(
            f"DDP needs each rank to load its own shard, but this DataLoader's batch_sampler "
            f"({kind.__name__}) has no batch_size / drop_last, so ddpkit cannot build it again "
            f"around a DistributedSampler. {_OUT}"
        )
    drop_last = False if predict else batch_sampler.drop_last
    try:
        return kind(sampler, batch_size=batch_sampler.batch_size, drop_last=drop_last)
    except TypeError as err:
        raise MisconfigurationError(
            f"DDP needs each rank to load its own shard, but {kind.__name__}(sampler, "
            f"batch_size={batch_sampler.batch_size!r}, drop_last={drop_last!r}) raised "
            f"TypeError: {err}; ddpkit builds a batch sampler again with BatchSampler's "
            f"arguments. Fix: give {kind.__name__}.__init__ BatchSampler's arguments (sampler, "
            f"batch_size, drop_last), or shard it yourself and pass "
            f"Trainer(use_distributed_sampler=False)."
        ) from None


def _init_kwargs(loader: DataLoader[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The loader's constructor parameters, and the values of its attributes that differ from
    their defaults (Lightning's reading of a loader it did not see being built)."""
    attrs = {k: v for k, v in vars(loader).items() if not k.startswith("_")}
    attrs["multiprocessing_context"] = loader.multiprocessing_context
    params = dict(inspect.signature(type(loader).__init__).parameters)
    params.pop("self", None)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        # **kwargs is taken to reach DataLoader.__init__ (super().__init__(**kwargs))
        params.update(inspect.signature(DataLoader.__init__).parameters)
        params.pop("self", None)
    wanted = {name for name, p in params.items() if name in attrs and p.default is not attrs[name]}
    wanted.add("dataset")
    return params, {k: v for k, v in attrs.items() if k in wanted}


def rebuild_loader(
    loader: DataLoader[Any], sampler: Sampler[int], *, predict: bool = False, **extra: Any
) -> DataLoader[Any]:
    """A new loader of the same class and options whose indices come from ``sampler`` (the
    user's batch sampler rebuilt around it); ``extra`` overrides further arguments (e.g.
    ``worker_init_fn``). The user's loader is left as it was."""
    params, kwargs = _init_kwargs(loader)
    if isinstance(loader.dataset, IterableDataset):
        kwargs.update(sampler=None, batch_sampler=None)
    else:
        batch_sampler = user_batch_sampler(loader)
        if batch_sampler is not None:
            kwargs.update(
                sampler=None,
                shuffle=False,
                batch_sampler=_batch_sampler_around(batch_sampler, sampler, predict),
                batch_size=1,
                drop_last=False,
            )
        else:
            kwargs.update(sampler=sampler, shuffle=False, batch_sampler=None)
    kwargs.update(extra)
    name = type(loader).__name__
    missing = sorted(
        p.name
        for p in params.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        and p.default is p.empty
        and p.name not in kwargs
    )
    if missing:
        raise MisconfigurationError(
            f"DDP needs each rank to load its own shard, so ddpkit builds this {name} again with "
            f"a DistributedSampler, but its __init__ arguments {missing} are not attributes of "
            f"the instance. Fix: keep them as self.<name> in {name}.__init__, or shard it "
            f"yourself and pass Trainer(use_distributed_sampler=False)."
        )
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise MisconfigurationError(
            f"DDP needs each rank to load its own shard, so ddpkit builds this {name} again with "
            f"a DistributedSampler, but {name}.__init__ does not take {unknown}. Fix: add them "
            f"(or **kwargs passed on to DataLoader) to {name}.__init__, or shard it yourself and "
            f"pass Trainer(use_distributed_sampler=False)."
        )
    return type(loader)(**kwargs)
