"""The README's main job, ``examples/train.py`` (what ``scripts/main.sh`` runs), really trains
on 2 CPU processes and prints the plan, the per-epoch metrics and the checkpoint."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddpkit.trainer.checkpoint import load_checkpoint

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train.py"


@pytest.mark.timeout(240)
def test_the_main_example_trains_on_two_processes(tmp_path: Path) -> None:
    epochs, samples, batch = 3, 512, 64
    root = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            f"--epochs={epochs}",
            f"--samples={samples}",
            f"--batch-size={batch}",
            f"--root-dir={root}",
        ],
        cwd=tmp_path,  # from anywhere: nothing depends on the working directory
        capture_output=True,
        text=True,
        timeout=200,
    )
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr

    # The plan, once (rank 1 re-runs the script but prints nothing of its own).
    assert out.count("plan for Trainer(") == 1
    assert "plan for Trainer(accelerator='ddp_cpu', num_processes=2, plugins=[DDPPlugin(" in out
    assert re.search(r"launcher\s+subprocess", out)

    # Per-epoch metrics, reduced across the ranks; the training loss goes down.
    train_losses = [
        float(v) for v in re.findall(r"train_loss_epoch=([0-9.]+)", out.split("done:")[0])
    ]
    val_accs = re.findall(r"val_acc=([0-9.]+)", out.split("done:")[0])
    assert len(train_losses) == epochs
    assert len(val_accs) == epochs
    assert train_losses[-1] < train_losses[0]

    steps = epochs * (samples // 2 // batch)
    summary = out.strip().splitlines()[-1]
    assert summary.startswith(f"done: {epochs} epochs, {steps} steps on 2 process(es);")
    checkpoint = root / "checkpoints" / f"epoch={epochs - 1}-step={steps}.ckpt"
    assert summary.endswith(f"checkpoint: {checkpoint}")
    saved = load_checkpoint(checkpoint)
    # Lightning's meaning: written by the last epoch (0-based), which a resume continues after.
    assert (saved["epoch"], saved["global_step"]) == (epochs - 1, steps)
    assert saved["loops"]["epochs_completed"] == epochs
    # Everything went under --root-dir.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert sorted(p.name for p in root.iterdir()) == ["checkpoints", "metrics.csv"]
