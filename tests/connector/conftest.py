"""A fake machine for resolution tests: only torch.cuda's two probes and os.environ change,
exactly what a user's own test would patch."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import pytest
import torch

# Variables that make the connector see a launcher; cleared so the host's shell cannot leak in.
_LAUNCHER_VARIABLES = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
    "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "DDPKIT_PARENT_PID",
)  # fmt: skip

Machine = Callable[..., None]


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Machine:
    """``machine(gpus=2, env={...})``: what torch.cuda reports and which variables are set."""
    for key in list(os.environ):
        if key in _LAUNCHER_VARIABLES or key.startswith("SLURM_"):
            monkeypatch.delenv(key)

    def configure(gpus: int = 0, env: Mapping[str, str] | None = None) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)

    configure()
    return configure
