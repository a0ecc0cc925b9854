"""ddpkit's own exchanges between ranks, as bytes in tensors: never a pickle.

``torch.distributed``'s object collectives (``broadcast_object_list``, ``all_gather_object``)
pickle on one rank and unpickle on the others: whoever can put bytes into a rank's connections
can run code in it. What ddpkit's own code passes between ranks — a checkpoint's save plan, the
loggers' versions, the checkpoint a restart resumes from, each rank's RNG state, predictions —
goes as bytes in ``uint8`` tensors instead, and is read as JSON (or, for predictions, with
``torch.load(weights_only=True)``, which builds tensors and plain containers only). A user's own
``broadcast_object`` keeps torch's pickles, as in Lightning.

Each function is one collective over the default process group: every rank must call it.
:class:`Exchanger` makes them as one rank of a training type does (ddpkit's, or a Lightning
strategy's).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def _bytes_of(tensor: torch.Tensor, size: int) -> bytes:
    """The first ``size`` bytes of a uint8 tensor (numpy is not a dependency of ddpkit)."""
    if size == 0:
        return b""
    flat = tensor[:size].cpu().contiguous()
    return ctypes.string_at(flat.data_ptr(), size)


def _tensor_of(data: bytes, device: torch.device) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)


def broadcast_bytes(data: bytes | None, src: int, device: torch.device) -> bytes:
    """``data`` of rank ``src`` on every rank (the others pass None)."""
    dist = _dist()
    mine = dist.get_rank() == src
    length = torch.tensor([len(data) if mine and data is not None else 0], device=device)
    dist.broadcast(length, src=src)
    size = int(length.item())
    if mine and data:
        buffer = _tensor_of(data, device)
    else:
        buffer = torch.empty(size, dtype=torch.uint8, device=device)
    if size:
        dist.broadcast(buffer, src=src)
    return data if (mine and data is not None) else _bytes_of(buffer, size)


def all_gather_bytes(data: bytes, device: torch.device) -> list[bytes]:
    """Every rank's ``data``, in rank order."""
    dist = _dist()
    world = dist.get_world_size()
    length = torch.tensor([len(data)], dtype=torch.int64, device=device)
    lengths = [torch.empty_like(length) for _ in range(world)]
    dist.all_gather(lengths, length)
    sizes = [int(t.item()) for t in lengths]
    longest = max(sizes)
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    if data:
        padded[: len(data)] = _tensor_of(data, device)
    out = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(world)]
    if longest:
        dist.all_gather(out, padded)
    return [_bytes_of(t, n) for t, n in zip(out, sizes)]


def _encode(obj: Any) -> bytes:
    try:
        return json.dumps(obj).encode()
    except (TypeError, ValueError) as err:  # a bug in ddpkit: its own exchanges are JSON
        raise TypeError(f"ddpkit exchanges JSON between ranks, not {obj!r}: {err}") from err


def json_round_trip(obj: Any) -> Any:
    """What :func:`broadcast_json` gives the other ranks, for a single process: the same
    conversions (tuples become lists), so that one rank and many behave alike."""
    return json.loads(_encode(obj))


def broadcast_json(obj: Any, src: int, device: torch.device) -> Any:
    """``obj`` (JSON-able) of rank ``src``, on every rank."""
    dist = _dist()
    data = _encode(obj) if dist.get_rank() == src else None
    return json.loads(broadcast_bytes(data, src, device))


class Exchanger:
    """ddpkit's exchanges as one rank of a training type makes them: without a process group a
    single process's answer (the same JSON conversions), else the collective on the rank's
    ``device()`` under nccl (the CPU under gloo), inside ``watch(where)`` (a training type's
    stall watchdog, so that it sees the rank waiting there)."""

    def __init__(
        self,
        device: Callable[[], torch.device],
        watch: Callable[[str], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self._device = device
        self._watch = watch or contextlib.nullcontext  # unwatched

    def _exchange_device(self) -> torch.device:
        # nccl moves CUDA tensors only; gloo takes CPU ones.
        return self._device() if _dist().get_backend() == "nccl" else torch.device("cpu")

    def broadcast_json(self, obj: Any, src: int = 0) -> Any:
        if not _dist().is_initialized():
            return json_round_trip(obj)
        with self._watch("broadcast_json"):
            return broadcast_json(obj, src, self._exchange_device())

    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        if not _dist().is_initialized():
            return [data]
        with self._watch("all_gather_bytes"):
            return all_gather_bytes(data, self._exchange_device())
