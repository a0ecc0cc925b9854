"""scripts/gpu_check.sh can fail: with no CUDA device visible it exits at once with one line, and
a GPU test that skips fails its test run. Both run on any machine (CUDA hidden from the child),
so that under gpu_check.sh itself they pass instead of skipping."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_CUDA = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable}


@pytest.mark.timeout(90)
def test_without_a_cuda_device_the_check_fails_with_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in NO_CUDA.items() if k != "OUT"}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh")],
        env={**env, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=80,
        check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("gpu_check: no CUDA device is visible (torch "), lines[0]
    assert list(tmp_path.iterdir()) == [], "gpu_check.sh left a temporary folder behind"


@pytest.mark.timeout(120)
def test_a_skipped_gpu_test_fails_the_check_run() -> None:
    command = [
        sys.executable, "-m", "pytest", str(ROOT / "tests" / "gpu"), "-q", "-p", "no:cacheprovider",
        "-n", "0",  # as gpu_check.sh runs them
        "--deselect", "tests/gpu/test_gpu_check.py",  # not itself again
    ]  # fmt: skip
    strict = subprocess.run(
        command, cwd=ROOT, env={**NO_CUDA, "GPU_CHECK_NO_SKIPS": "1"},
        capture_output=True, text=True, timeout=110, check=False,
    )  # fmt: skip
    assert strict.returncode == 1, strict.stdout[-3000:]
    assert (
        "GPU test(s) skipped (tests/gpu/test_gpu.py::test_single_gpu_fit[32-true]" in strict.stdout
    )
    assert "a skip is no pass" in strict.stdout
