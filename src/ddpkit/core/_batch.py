"""A batch (a tensor, or lists, tuples, namedtuples, dicts and dataclasses of them): moved to a
device, and its size as Lightning infers it for the epoch means of ``self.log``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch

from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._rank_zero import rank_zero_warn


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


def _sizes(batch: Any) -> Iterator[int | None]:
    """Every tensor's first dimension, depth first (Lightning's ``_extract_batch_size``)."""
    if isinstance(batch, torch.Tensor):
        yield 1 if batch.ndim == 0 else batch.size(0)
    elif isinstance(batch, Mapping):
        for value in batch.values():
            yield from _sizes(value)
    elif isinstance(batch, Iterable) and not isinstance(batch, str):
        for value in batch:
            yield from _sizes(value)
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        for field in dataclasses.fields(batch):
            yield from _sizes(getattr(batch, field.name))
    else:
        yield None


def batch_size_of(batch: Any) -> int:
    """The batch size Lightning infers: the first tensor's first dimension (a scalar counts 1);
    a warning when another tensor disagrees; an error when the batch holds no tensor."""
    found: int | None = None
    try:
        for size in _sizes(batch):
            if found is None:
                found = size
            elif size != found:
                rank_zero_warn(
                    f"Trying to infer the `batch_size` from an ambiguous collection. The batch "
                    f"size we found is {found}. To avoid any miscalculations, use "
                    f"`self.log(..., batch_size=batch_size)`.",
                    UserWarning,  # Lightning's own warning, as Lightning gives it
                )
                break
    except RecursionError:
        found = None
    if found is None:
        raise MisconfigurationError(
            "We could not infer the batch_size from the batch. Either simplify its structure or "
            "provide the batch_size as `self.log(..., batch_size=batch_size)`."
        )
    return found
