"""Fixtures of the integration tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_SHARED = "DDPKIT_TEST_SHARED_DIR"


@pytest.fixture
def shared_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder every rank of the test sees: rank zero's ``tmp_path``, handed through the
    environment to the ranks it starts (a re-run test would get a ``tmp_path`` of its own)."""
    path = Path(os.environ.get(_SHARED) or tmp_path)
    monkeypatch.setenv(_SHARED, str(path))
    return path
