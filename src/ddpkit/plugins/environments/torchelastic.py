"""torchrun (torch.distributed.run / torch elastic) started every rank."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments.base import ClusterEnvironment

__all__ = ["TorchElasticEnvironment"]

_REQUIRED = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE")


class TorchElasticEnvironment(ClusterEnvironment):
    """Ranks, world size and the rendezvous address come from torchrun's variables."""

    name: ClassVar[str] = "torchelastic"
    detection_variables: ClassVar[tuple[str, ...]] = (*_REQUIRED, "TORCHELASTIC_RUN_ID")

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return all(k in env for k in _REQUIRED)

    @property
    def creates_processes_externally(self) -> bool:
        return True

    def main_address(self) -> str:
        return self.env.get("MASTER_ADDR", "127.0.0.1")

    def main_port(self) -> int:
        return self._int("MASTER_PORT")

    def world_size(self) -> int:
        return self._int("WORLD_SIZE")

    def global_rank(self) -> int:
        return self._int("RANK")

    def local_rank(self) -> int:
        return self._int("LOCAL_RANK")

    def node_rank(self) -> int:
        return self._int("GROUP_RANK")

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        actual = self.world_size()
        if devices * num_nodes != actual:
            local = self._int("LOCAL_WORLD_SIZE")
            raise MisconfigurationError(
                f"{call}: devices({devices}) × num_nodes({num_nodes}) = {devices * num_nodes}, "
                f"but torchrun started WORLD_SIZE={actual} (LOCAL_WORLD_SIZE={local}). "
                f"Fix: pass devices={local}, num_nodes={max(1, actual // max(1, local))} "
                f"(or change torchrun's --nproc-per-node / --nnodes)."
            )
