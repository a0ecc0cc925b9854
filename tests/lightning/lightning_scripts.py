"""Running one of ``tests/lightning/scripts/`` in a process of its own, as the tests that train
on two real ranks do (the subprocess launcher re-runs the command line for rank 1, so such a
run cannot happen inside the pytest process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

__all__ = ["SCRIPTS", "run_lightning_script"]

SCRIPTS = Path(__file__).parent / "scripts"


def run_lightning_script(name: str, out: Path, *args: str) -> dict[str, Any]:
    """Run ``scripts/<name>`` with ``--out out`` (a folder made here) and ``args``: what it saved
    in ``out/result.pt``. Fails with the end of the script's stderr unless it exits 0."""
    out.mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / name), "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = torch.load(out / "result.pt", weights_only=False)
    return result
