"""The environment of a job ddpkit starts itself, on this machine or one node of several."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ddpkit.plugins.environments.base import ClusterEnvironment

__all__ = ["LocalEnvironment"]


class LocalEnvironment(ClusterEnvironment):
    """ddpkit's own launcher starts the ranks of this node.

    The user's process has no rank variables: it is global rank ``NODE_RANK × processes per
    node`` and starts the others. A child ddpkit started reads ``LOCAL_RANK``, ``NODE_RANK`` and
    ``WORLD_SIZE`` from its environment. For several machines without a scheduler, the user sets
    ``MASTER_ADDR``, ``MASTER_PORT`` and ``NODE_RANK`` on each machine.
    """

    name: ClassVar[str] = "local"
    detection_variables: ClassVar[tuple[str, ...]] = ("LOCAL_RANK", "NODE_RANK", "MASTER_PORT")

    def __init__(
        self, env: Mapping[str, str] | None = None, *, processes_per_node: int = 1
    ) -> None:
        super().__init__(env)
        self._processes_per_node = processes_per_node
        self._num_nodes = 1
        self._assigned_port: int | None = None

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return True

    @property
    def creates_processes_externally(self) -> bool:
        return False

    @property
    def is_launched_child(self) -> bool:
        """True in a rank ddpkit's launcher started (it never launches again)."""
        return "LOCAL_RANK" in self.env

    def configure(self, *, processes_per_node: int, num_nodes: int) -> None:
        """The shape of the job, from the training type the connector built."""
        self._processes_per_node = processes_per_node
        self._num_nodes = num_nodes

    def main_address(self) -> str:
        return self.env.get("MASTER_ADDR", "127.0.0.1")

    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._int("MASTER_PORT")
        if self._assigned_port is None:
            raise RuntimeError("LocalEnvironment.main_port() read before the launcher chose a port")
        return self._assigned_port

    def has_main_port(self) -> bool:
        return "MASTER_PORT" in self.env or self._assigned_port is not None

    def adopt(self, env: Mapping[str, str]) -> None:
        """In a spawned rank: read the rank variables the spawn launcher gave this process."""
        self._env = dict(env)

    def assign_port(self, port: int) -> None:
        """The launcher's free port, for the rank that chose it (children read MASTER_PORT)."""
        self._assigned_port = port

    def world_size(self) -> int:
        return self._int("WORLD_SIZE", self._processes_per_node * self._num_nodes)

    def node_rank(self) -> int:
        return self._int("NODE_RANK", 0)

    def local_rank(self) -> int:
        return self._int("LOCAL_RANK", 0)

    def global_rank(self) -> int:
        return self.node_rank() * self._processes_per_node + self.local_rank()
