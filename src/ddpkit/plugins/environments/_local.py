"""The environment of a job ddpkit starts itself, on this machine or one node of several."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ClusterEnvironment

#: What the user sets on every machine of a job of several nodes without a scheduler.
RENDEZVOUS_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK")


class LocalEnvironment(ClusterEnvironment):
    """ddpkit's own launcher starts the ranks of this node (Lightning 1.x's
    ``LightningEnvironment``, which is also importable under that name).

    The user's process has no rank variables: it is local rank 0 of its node and starts the
    others. A rank ddpkit started reads ``LOCAL_RANK``, ``NODE_RANK`` and ``WORLD_SIZE`` from its
    environment; so does a process the user started with those variables set by hand, which is
    why :attr:`creates_processes_externally` is true wherever ``LOCAL_RANK`` is set: such a
    process is one rank of a job someone else started, and never launches.

    Several machines without a scheduler: the user starts the same script on each, with
    ``MASTER_ADDR`` (node 0's address), ``MASTER_PORT`` (a free port there) and ``NODE_RANK``
    (0 .. num_nodes - 1; torchrun's ``GROUP_RANK`` is read when ``NODE_RANK`` is not set); each
    machine's process starts the ranks of its node, and they all meet at
    ``MASTER_ADDR:MASTER_PORT``, where global rank 0 hosts the store.

    After pickling (a spawned rank), an environment the connector built reads the environment
    of the process it is in: the rank variables its launcher gave it.
    """

    name: ClassVar[str] = "local"
    detection_variables: ClassVar[tuple[str, ...]] = (
        "LOCAL_RANK",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
    )

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__(env)
        self._port_hint: int | None = None

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return True

    @property
    def creates_processes_externally(self) -> bool:
        return "LOCAL_RANK" in self.env

    def main_address(self) -> str:
        return self.env.get("MASTER_ADDR", "127.0.0.1")

    def requested_port(self) -> int | None:
        """The port the ranks must meet on, when the user chose one (``MASTER_PORT``, or a
        subclass's own ``main_port``); None lets ddpkit's launcher bind a free one."""
        if "MASTER_PORT" in self.env:
            return self._int("MASTER_PORT")
        if type(self).main_port is not LocalEnvironment.main_port:
            return self.main_port()
        return None

    def main_port(self) -> int:
        """``MASTER_PORT``; without it, a free port chosen once (Lightning 1.x's behaviour for
        code that asks). ddpkit's launchers do not use that one: they bind a port of their own
        and hand it, open, to the store, so that no other process can take it in between."""
        if "MASTER_PORT" in self.env:
            return self._int("MASTER_PORT")
        if self._port_hint is None:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                self._port_hint = int(sock.getsockname()[1])
        return self._port_hint

    def world_size(self) -> int:
        if self._world_size is not None:
            return self._world_size
        return self._int("WORLD_SIZE", 1)

    def global_rank(self) -> int:
        if self._global_rank is not None:
            return self._global_rank
        return self._int("RANK", 0)

    def local_rank(self) -> int:
        return self._int("LOCAL_RANK", 0)

    def node_rank(self) -> int:
        if "NODE_RANK" in self.env:
            return self._int("NODE_RANK")
        return self._int("GROUP_RANK", 0)

    def teardown(self) -> None:
        # Lightning 1.x: the training type exported WORLD_SIZE for the stage; it goes with it.
        if self._env is None:
            os.environ.pop("WORLD_SIZE", None)

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        self._check_integers(
            call, ("MASTER_PORT", "NODE_RANK", "GROUP_RANK", "LOCAL_RANK", "WORLD_SIZE")
        )
        if "MASTER_PORT" in self.env and not 0 < self._int("MASTER_PORT") < 65536:
            raise MisconfigurationError(
                f"{call}: MASTER_PORT={self.env['MASTER_PORT']!r} is not a TCP port. Fix: set "
                f"MASTER_PORT to a free port in 1..65535, or unset it and ddpkit picks one."
            )
        if self.creates_processes_externally:
            self._validate_rank(devices, num_nodes, call)
            return
        if "NODE_RANK" not in self.env and "GROUP_RANK" not in self.env:
            return
        node = self.node_rank()
        if not 0 <= node < num_nodes:
            raise MisconfigurationError(
                f"{call}: NODE_RANK={node}, but num_nodes={num_nodes} has node ranks "
                f"0..{num_nodes - 1}. Fix: pass num_nodes={max(num_nodes, node + 1)} (every "
                f"machine the same), or unset NODE_RANK on a single machine."
            )

    def _validate_rank(self, devices: int, num_nodes: int, call: str) -> None:
        """A rank someone else started: its variables must fit the job its flags describe."""
        local = self.local_rank()
        if not 0 <= local < devices:
            raise MisconfigurationError(
                f"{call}: LOCAL_RANK={local}, but devices={devices} has local ranks "
                f"0..{devices - 1}. Fix: every rank must pass the same devices (and the "
                f"launcher must start devices ranks per node)."
            )
        if "WORLD_SIZE" in self.env and self.world_size() != devices * num_nodes:
            raise MisconfigurationError(
                f"{call}: devices({devices}) × num_nodes({num_nodes}) = {devices * num_nodes}, "
                f"but this rank was started with WORLD_SIZE={self.world_size()}. Fix: every "
                f"rank must pass the same device flags as the process that started the job."
            )

    def __getstate__(self) -> dict[str, object]:
        # A spawned rank reads the environment of its own process (its rank variables).
        state = super().__getstate__()
        state["_env"] = None
        return state


#: Lightning 1.x's name for the same environment.
LightningEnvironment = LocalEnvironment
