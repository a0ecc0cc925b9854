"""The environment of a job ddpkit starts itself, on this machine or one node of several."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments.base import ClusterEnvironment

__all__ = ["LocalEnvironment"]

#: What the user sets on every machine of a job of several nodes without a scheduler.
RENDEZVOUS_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK")


class LocalEnvironment(ClusterEnvironment):
    """ddpkit's own launcher starts the ranks of this node.

    The user's process has no rank variables: it is global rank ``NODE_RANK × processes per
    node`` and starts the others. A child ddpkit started reads ``LOCAL_RANK``, ``NODE_RANK`` and
    ``WORLD_SIZE`` from its environment.

    Several machines without a scheduler: the user starts the same script on each, with
    ``MASTER_ADDR`` (node 0's address), ``MASTER_PORT`` (a free port there) and ``NODE_RANK``
    (0 .. num_nodes - 1) set; each machine's process starts the ranks of its node, and they all
    meet at ``MASTER_ADDR:MASTER_PORT``, where global rank 0 hosts the store. Without those
    variables the nodes could never find each other, so launching fails at once, naming them.
    """

    name: ClassVar[str] = "local"
    detection_variables: ClassVar[tuple[str, ...]] = (
        "LOCAL_RANK",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
    )

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

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        if self.is_launched_child or "NODE_RANK" not in self.env:
            return
        node = self._int("NODE_RANK")
        if not 0 <= node < num_nodes:
            raise MisconfigurationError(
                f"{call}: NODE_RANK={node}, but num_nodes={num_nodes} has node ranks "
                f"0..{num_nodes - 1}. Fix: pass num_nodes={max(num_nodes, node + 1)} (every "
                f"machine the same), or unset NODE_RANK on a single machine."
            )

    def require_rendezvous(self) -> None:
        """Raise when this process would start the ranks of one node of several, but the user
        did not say where the nodes meet (the other nodes would wait forever)."""
        if self._num_nodes <= 1 or self.is_launched_child:
            return
        missing = [k for k in RENDEZVOUS_VARIABLES if k not in self.env]
        if not missing:
            return
        nodes, per_node = self._num_nodes, self._processes_per_node
        raise MisconfigurationError(
            f"Trainer(devices={per_node}, num_nodes={nodes}) without torchrun or SLURM: each of "
            f"the {nodes} machines starts its {per_node} rank(s) and all "
            f"{nodes} × {per_node} = {nodes * per_node} meet at MASTER_ADDR:MASTER_PORT, but "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set here. Fix: on "
            f"every machine run `MASTER_ADDR=<node 0's address> MASTER_PORT=<free port on node "
            f"0> NODE_RANK=<0..{nodes - 1}> python script.py ...` (NODE_RANK=0 on node 0)."
        )

    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._int("MASTER_PORT")
        if self._assigned_port is None:
            raise RuntimeError("LocalEnvironment.main_port() read before the launcher chose a port")
        return self._assigned_port

    def has_main_port(self) -> bool:
        """Whether the port is known; the launchers ask this first, before starting anything."""
        self.require_rendezvous()
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
        self.require_rendezvous()
        return self._int("NODE_RANK", 0)

    def local_rank(self) -> int:
        return self._int("LOCAL_RANK", 0)

    def global_rank(self) -> int:
        return self.node_rank() * self._processes_per_node + self.local_rank()
