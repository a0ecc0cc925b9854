"""examples/lightning_1x.py (docs/lightning.md's complete script) runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lightning_1x.py"


@pytest.mark.timeout(200)
def test_the_1x_example_trains_on_two_ranks(tmp_path: Path) -> None:
    root = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--epochs=2", f"--root-dir={root}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr}"
    assert out.count("1.x spelling: ") == 3  # devices, progress bar, summary: once, on rank 0
    assert (
        "Lightning 2.x spelling of the device flags: "
        "Trainer(accelerator='cpu', devices=2, strategy='ddp')"
    ) in out
    assert "strategy: DDPStrategy, epochs run: 2" in out
    assert re.search(r"^test_loss=\d+\.\d{4}$", out, re.M)
    best = re.search(r"^best checkpoint: (\S+) \(hidden=32\)$", out, re.M)
    assert best is not None and Path(best.group(1)).is_file()
    assert list(root.glob("logs/version_*/metrics.csv"))
