"""Fixtures of the integration tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from fault_scripts.restarts import restart_run, weights

_SHARED = "DDPKIT_TEST_SHARED_DIR"


@pytest.fixture
def shared_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder every rank of the test sees: rank zero's ``tmp_path``, handed through the
    environment to the ranks it starts (a re-run test would get a ``tmp_path`` of its own)."""
    path = Path(os.environ.get(_SHARED) or tmp_path)
    monkeypatch.setenv(_SHARED, str(path))
    return path


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    """The weights of an uninterrupted run of ``fault_scripts/restart_run.py`` (no fault, no
    restart), which the restart and store tests compare theirs with."""
    run, out = restart_run("subprocess", tmp_path_factory.mktemp("reference"), fault="none")
    assert run.returncode == 0, run.stderr
    return weights(out)
