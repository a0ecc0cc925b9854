"""Helpers for the tests of ddpkit.testing (pytester comes from pyproject's addopts)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from ddpkit.utilities import _procs as procs

#: A child that outlives any test unless it is ended (no torch: starts in milliseconds).
SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A real child process; ended and reaped after the test whatever happened."""
    proc = subprocess.Popen(SLEEPER)
    yield proc
    procs.end_processes([proc.pid], grace=0)
    proc.wait()
