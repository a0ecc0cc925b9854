"""Kubeflow's PyTorchJob operator started every rank: one process per pod.

The operator gives each pod's container ``MASTER_ADDR`` (the master pod's service),
``MASTER_PORT``, ``WORLD_SIZE`` (the pods) and ``RANK`` (this pod); Kubernetes adds
``KUBERNETES_PORT`` to every container. Each pod runs one rank, local rank 0 of its own node:
node rank = global rank = ``RANK``, as in Lightning's ``KubeflowEnvironment``.

Detection is Lightning 1.x's rule (1.5 to 1.9): ``KUBERNETES_PORT``, ``MASTER_ADDR``,
``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK`` set, and none of torchrun's ``GROUP_RANK``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` (a PyTorchJob with ``nprocPerNode`` runs torchrun in each
pod: that is torchrun's job). Lightning 2.x stopped detecting it and asks for
``plugins=[KubeflowEnvironment()]``; ddpkit keeps 1.x's rule, because without it every pod
would take itself for rank 0 of a job of its own (docs/flags.md, Differences from Lightning).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ExternalEnvironment

_REQUIRED = ("KUBERNETES_PORT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")
#: torchrun's: a pod whose process torchrun started is torchrun's job
_TORCHRUN = ("GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


class KubeflowEnvironment(ExternalEnvironment):
    """A PyTorchJob pod: one rank, its number in ``RANK``; see the module docstring."""

    name: ClassVar[str] = "kubeflow"
    detection_variables: ClassVar[tuple[str, ...]] = _REQUIRED

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return all(k in env for k in _REQUIRED) and not any(k in env for k in _TORCHRUN)

    def main_address(self) -> str:
        return self.env["MASTER_ADDR"]

    def main_port(self) -> int:
        return self._int("MASTER_PORT")

    def world_size(self) -> int:
        return self._int("WORLD_SIZE")

    def global_rank(self) -> int:
        return self._int("RANK")

    def local_rank(self) -> int:
        return 0

    def node_rank(self) -> int:
        return self.global_rank()

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        missing = [k for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")
                   if k not in self.env]  # fmt: skip
        if missing:
            raise MisconfigurationError(
                f"{call}: the KubeflowEnvironment says Kubeflow's PyTorchJob started every rank, "
                f"but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: the "
                f"operator did not start this process. Fix: run it as a PyTorchJob replica, or "
                f"drop the KubeflowEnvironment and ddpkit starts the ranks itself."
            )
        self._check_integers(call, ("MASTER_PORT", "WORLD_SIZE", "RANK"))
        pods = self.world_size()
        fix = f"Fix: pass devices=1, num_nodes={pods} (one rank per pod: WORLD_SIZE={pods} pods)."
        if devices != 1:
            raise MisconfigurationError(
                f"{call}: devices={devices} processes on each node, but a PyTorchJob pod runs "
                f"one process (local rank 0). {fix} For several processes per pod, set the "
                f"job's nprocPerNode: the operator then starts torchrun in each pod."
            )
        if num_nodes != pods:
            raise MisconfigurationError(
                f"{call}: devices(1) × num_nodes({num_nodes}) = {num_nodes}, but the "
                f"PyTorchJob has WORLD_SIZE={pods} pods. {fix}"
            )

    def __repr__(self) -> str:
        return "KubeflowEnvironment()"
