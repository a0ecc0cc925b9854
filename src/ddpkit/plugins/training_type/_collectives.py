"""The collectives of a distributed training type, each inside :meth:`collective` (so that the
stall watchdog sees a rank waiting in it), each a no-op without a process group.

``broadcast_object`` / ``all_gather_object`` are torch's (pickles, for the user's own objects, as
in Lightning); ``broadcast_json`` / ``all_gather_bytes`` carry ddpkit's own exchanges as bytes in
tensors (:mod:`ddpkit.utilities._exchange`): no rank unpickles what another sent.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.plugins.training_type._process_group import all_reduce
from ddpkit.utilities._exchange import Exchanger


class DistributedCollectives(TrainingTypePlugin):
    """A training type whose ranks meet in the default process group."""

    @property
    def backend(self) -> str:
        raise NotImplementedError  # the distributed training type says

    def barrier(self, name: str | None = None) -> None:
        if dist.is_initialized():
            with self.collective(f"barrier({name})" if name else "barrier"):
                dist.barrier()

    def all_reduce(self, tensor: torch.Tensor, reduce_op: str = "mean") -> torch.Tensor:
        if not dist.is_initialized():
            return tensor
        return all_reduce(
            tensor,
            reduce_op,
            world_size=self.world_size,
            device=self.root_device,
            collective=self.collective,
        )

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        if not dist.is_initialized():
            return obj
        box = [obj]
        with self.collective("broadcast_object"):
            dist.broadcast_object_list(box, src=src)
        return box[0]

    def all_gather_object(self, obj: Any) -> list[Any]:
        if not dist.is_initialized():
            return [obj]
        out: list[Any] = [None] * self.world_size
        with self.collective("all_gather_object"):
            dist.all_gather_object(out, obj)
        return out

    def broadcast_json(self, obj: Any, src: int = 0) -> Any:
        return self._exchanger.broadcast_json(obj, src)

    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        return self._exchanger.all_gather_bytes(data)

    @property
    def _exchanger(self) -> Exchanger:
        return Exchanger(lambda: self.root_device, self.collective)
