"""A checkpoint write killed half-way leaves the previous checkpoint intact, and its partial file
goes with the next save or the next run in that folder.

What a user can expect after ``kill -9`` during ``trainer.save_checkpoint`` / the end-of-fit
checkpoint: the checkpoint file is the previous one, complete and loadable; the half-written
data sits in a hidden sibling ``.<name>.<writer>.<random>.tmp`` that no ``*.ckpt`` pattern
matches; the next save in that folder (or the next fit whose ModelCheckpoint writes there)
removes it, since its writer is gone.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from ddpkit.core._saving import load_checkpoint
from ddpkit.trainer._checkpoint import atomic_save

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

    if where == "pickling":
        # The next save in the folder (another file) sweeps the dead writer's partial first.
        atomic_save({"state_dict": {"weight": torch.zeros(3)}, "global_step": 3}, target)
        assert load_checkpoint(target)["global_step"] == 3
    else:
        # The next run whose ModelCheckpoint writes there, as soon as its fit starts (this one
        # saves nothing at all).
        fit_saving_nothing(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt", marker.name]


def fit_saving_nothing(folder: Path) -> None:
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    import ddpkit
    from ddpkit.callbacks import ModelCheckpoint

    class Tiny(ddpkit.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.net(batch[0]).sum()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = ddpkit.Trainer(
        max_steps=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(dirpath=folder, save_top_k=0)],
        default_root_dir=folder.parent,
    )
    trainer.fit(Tiny(), DataLoader(TensorDataset(torch.ones(2, 2)), batch_size=1))
