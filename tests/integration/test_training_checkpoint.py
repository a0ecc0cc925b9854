"""A checkpoint write killed half-way leaves the previous checkpoint intact.

What a user can expect after ``kill -9`` during ``trainer.save_checkpoint`` / the end-of-fit
checkpoint: the checkpoint file is the previous one, complete and loadable; the half-written
data sits in a hidden sibling ``.<name>.<random>.tmp`` that no ``*.ckpt`` pattern matches and
that may be deleted; the next save of the same file simply succeeds.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ddpkit.trainer.checkpoint import atomic_save, load_checkpoint

SCRIPT = Path(__file__).parent / "training_scripts" / "stalled_save.py"


def _wait_for_marker(proc: subprocess.Popen[bytes], marker: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"the writer ended (exit {proc.returncode}) early:\n{out}")
        if time.monotonic() > deadline:
            raise AssertionError("the writer never reached the stall")
        time.sleep(0.05)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("where", ["pickling", "rename"])
def test_a_save_killed_mid_write_leaves_the_previous_checkpoint(tmp_path: Path, where: str) -> None:
    target = tmp_path / "last.ckpt"
    atomic_save({"state_dict": {"weight": torch.ones(3)}, "global_step": 1}, target)
    marker = tmp_path / "stalled"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(target), str(marker), where],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_marker(proc, marker)
        leftovers = sorted(p.name for p in tmp_path.glob(".last.ckpt.*.tmp"))
        assert len(leftovers) == 1  # the write is under way, in a temporary file
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    previous = load_checkpoint(target)
    assert previous["global_step"] == 1
    assert torch.equal(previous["state_dict"]["weight"], torch.ones(3))
    # The half-written data is a hidden sibling, never taken for a checkpoint.
    (leftover,) = (p for p in tmp_path.iterdir() if p.name.startswith(".last.ckpt."))
    assert leftover.name.endswith(".tmp")
    assert sorted(p.name for p in tmp_path.glob("*.ckpt")) == ["last.ckpt"]
    if where == "rename":
        # Every byte was written, only the rename was not: the leftover is the new checkpoint.
        assert leftover.stat().st_size > 2**20
        assert load_checkpoint(leftover)["global_step"] == 2

    atomic_save({"state_dict": {"weight": torch.zeros(3)}, "global_step": 3}, target)
    assert load_checkpoint(target)["global_step"] == 3
