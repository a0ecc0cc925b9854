"""torchrun (torch.distributed.run / torch elastic) started every rank."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ExternalEnvironment

log = logging.getLogger(__name__)

_REQUIRED = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE")


class TorchElasticEnvironment(ExternalEnvironment):
    """torchrun started every rank: ranks, world size and the rendezvous come from its variables.

    torchrun exports ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``GROUP_RANK`` (the node rank),
    ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` / ``MASTER_PORT`` (its agent's store) and
    ``TORCHELASTIC_RUN_ID`` to each worker. ddpkit starts nothing: ``torchrun --nproc-per-node=2
    train.py`` with ``accelerator="ddp_cpu"``, ``strategy="ddp_spawn"`` or ``strategy="ddp"``
    trains the same two ranks.
    """

    name: ClassVar[str] = "torchelastic"
    detection_variables: ClassVar[tuple[str, ...]] = (*_REQUIRED, "TORCHELASTIC_RUN_ID")

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return all(k in env for k in _REQUIRED)

    def main_address(self) -> str:
        return self.env.get("MASTER_ADDR", "127.0.0.1")

    def main_port(self) -> int:
        return self._int("MASTER_PORT")

    def world_size(self) -> int:
        return self._int("WORLD_SIZE")

    def set_world_size(self, size: int) -> None:
        """torchrun decides: ignored, and logged (Lightning 1.x's message, at DEBUG)."""
        self._ignored(log, "TorchElasticEnvironment", "world size")

    def global_rank(self) -> int:
        return self._int("RANK")

    def set_global_rank(self, rank: int) -> None:
        """torchrun decides: ignored, and logged (Lightning 1.x's message, at DEBUG)."""
        self._ignored(log, "TorchElasticEnvironment", "global rank")

    def local_rank(self) -> int:
        return self._int("LOCAL_RANK")

    def node_rank(self) -> int:
        return self._int("GROUP_RANK")

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        if not self.detect(self.env):
            missing = ", ".join(k for k in _REQUIRED if k not in self.env)
            raise MisconfigurationError(
                f"{call}: the TorchElasticEnvironment says torchrun started every rank, but "
                f"{missing} {'is' if ',' not in missing else 'are'} not set: torchrun did not "
                f"start this process. Fix: run `torchrun --nproc-per-node={devices} script.py`, "
                f"or drop the TorchElasticEnvironment and ddpkit starts the ranks itself."
            )
        self._check_integers(call, (*_REQUIRED, "MASTER_PORT"))
        actual = self.world_size()
        local = self._int("LOCAL_WORLD_SIZE")
        nodes = max(1, actual // max(1, local))
        fix = (
            f"Fix: pass devices={local}, num_nodes={nodes} (or start torchrun with "
            f"--nproc-per-node={devices} --nnodes={num_nodes})."
        )
        if devices * num_nodes != actual:
            raise MisconfigurationError(
                f"{call}: devices({devices}) × num_nodes({num_nodes}) = {devices * num_nodes}, "
                f"but torchrun started WORLD_SIZE={actual} (LOCAL_WORLD_SIZE={local}). {fix}"
            )
        if devices != local:
            raise MisconfigurationError(
                f"{call}: devices={devices} processes on each node, but torchrun started "
                f"LOCAL_WORLD_SIZE={local} on this one (WORLD_SIZE={actual} = {local} × {nodes} "
                f"nodes). {fix}"
            )
