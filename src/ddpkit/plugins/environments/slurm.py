"""SLURM's srun started every rank."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments.base import ClusterEnvironment

__all__ = ["SLURMEnvironment", "expand_nodelist"]

# Job names SLURM gives an interactive allocation (`salloc`, `srun --pty bash`): there SLURM
# does not manage the training tasks, so ddpkit must start them itself.
_INTERACTIVE_JOB_NAMES = frozenset({"bash", "interactive"})


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand SLURM's compressed host list: ``"n[01-03,7],gpu1"`` → ``n01 n02 n03 n7 gpu1``."""
    hosts: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", nodelist):
        if plain:
            hosts.append(plain)
            continue
        for part in ranges.split(","):
            if "-" in part:
                lo, hi = part.split("-", 1)
                width = len(lo)
                hosts.extend(f"{prefix}{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
            else:
                hosts.append(f"{prefix}{part}")
    return hosts


class SLURMEnvironment(ClusterEnvironment):
    """Ranks from ``SLURM_PROCID`` / ``SLURM_LOCALID`` / ``SLURM_NODEID``; the main address is the
    first host of ``SLURM_NODELIST``; the port is ``MASTER_PORT`` or derived from the job id.

    Detected only in a job *step* (``SLURM_STEP_ID`` set): the batch script of ``sbatch
    --ntasks=N`` is one process that sees ``SLURM_NTASKS=N`` and ``SLURM_PROCID=0``, and trusting
    those would make it wait forever for ranks that never come.
    """

    name: ClassVar[str] = "slurm"
    detection_variables: ClassVar[tuple[str, ...]] = (
        "SLURM_NTASKS",
        "SLURM_PROCID",
        "SLURM_STEP_ID",
        "SLURM_JOB_NAME",
    )

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return (
            "SLURM_NTASKS" in env
            and "SLURM_PROCID" in env
            and "SLURM_STEP_ID" in env
            and env.get("SLURM_JOB_NAME", "") not in _INTERACTIVE_JOB_NAMES
        )

    @property
    def creates_processes_externally(self) -> bool:
        return True

    def main_address(self) -> str:
        if "MASTER_ADDR" in self.env:
            return self.env["MASTER_ADDR"]
        nodelist = self.env.get("SLURM_JOB_NODELIST") or self.env.get("SLURM_NODELIST", "")
        hosts = expand_nodelist(nodelist)
        return hosts[0] if hosts else "127.0.0.1"

    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._int("MASTER_PORT")
        # Every task of the job derives the same port from the job id, with no communication.
        job_id = self.env.get("SLURM_JOB_ID", "0")
        return 15000 + int(job_id[-4:] or 0)

    def world_size(self) -> int:
        return self._int("SLURM_NTASKS")

    def global_rank(self) -> int:
        return self._int("SLURM_PROCID")

    def local_rank(self) -> int:
        return self._int("SLURM_LOCALID")

    def node_rank(self) -> int:
        return self._int("SLURM_NODEID")

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        ntasks = self.world_size()
        if devices * num_nodes != ntasks:
            raise MisconfigurationError(
                f"{call}: devices({devices}) × num_nodes({num_nodes}) = {devices * num_nodes}, "
                f"but SLURM started SLURM_NTASKS={ntasks} tasks. Fix: request "
                f"--ntasks-per-node={devices} --nodes={num_nodes} from SLURM, or pass "
                f"devices={max(1, ntasks // max(1, num_nodes))}, num_nodes={num_nodes}."
            )
        nnodes = self.env.get("SLURM_NNODES")
        if nnodes is not None and int(nnodes) != num_nodes:
            raise MisconfigurationError(
                f"{call}: num_nodes={num_nodes}, but SLURM allocated SLURM_NNODES={nnodes}. "
                f"Fix: pass num_nodes={nnodes} or request --nodes={num_nodes}."
            )
