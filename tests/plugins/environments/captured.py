"""The variable sets real launchers gave their processes on this kind of machine (JSON files
next to this module; each file's ``_how`` says which commands produced them)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["mpi", "scenarios", "slurm", "torchrun"]

_HERE = Path(__file__).parent


@cache
def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_HERE / name).read_text())
    return data


def slurm(scenario: str, rank: str = "0") -> dict[str, str]:
    """What srun / sbatch / salloc gave one process (all its SLURM* variables)."""
    return dict(_load("slurm_variables.json")[scenario][rank])


def torchrun(scenario: str, rank: str = "0") -> dict[str, str]:
    """What torchrun added to one worker's environment."""
    return dict(_load("torchrun_variables.json")[scenario][rank])


def mpi(scenario: str, rank: str = "0") -> dict[str, str]:
    """What a real mpirun (Open MPI) or mpiexec (MPICH) gave one process."""
    return dict(_load("mpi_variables.json")[scenario][rank])


def scenarios(launcher: str) -> list[tuple[str, str]]:
    """Every (scenario, rank) captured for ``"slurm"``, ``"torchrun"`` or ``"mpi"``."""
    data = _load(f"{launcher}_variables.json")
    return [(name, rank) for name, ranks in data.items() if name != "_how" for rank in ranks]
