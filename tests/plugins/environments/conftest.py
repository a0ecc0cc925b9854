"""Environment tests start from a process that no launcher started (CI may run under one)."""

from __future__ import annotations

import os

import pytest

LAUNCHER_VARIABLES = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
    "MASTER_ADDR", "MASTER_PORT", "DDPKIT_PARENT_PID", "PMI_RANK", "PMI_SIZE", "KUBERNETES_PORT",
)  # fmt: skip
LAUNCHER_PREFIXES = ("SLURM_", "TORCHELASTIC_", "OMPI_", "MPI_LOCAL", "LSB_", "JSM_")


@pytest.fixture
def no_launcher(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Clear every launcher variable (restored after the test); returns the monkeypatch."""
    for key in list(os.environ):
        if key in LAUNCHER_VARIABLES or key.startswith(LAUNCHER_PREFIXES):
            monkeypatch.delenv(key)
    return monkeypatch
