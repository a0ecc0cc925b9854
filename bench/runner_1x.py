"""What ``python -m ddpkit.lightning`` adds to a 1.x script's start.

    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.runner_1x            # 9 rounds
    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.runner_1x --rounds 3

A 1.x project of two files (a script and its own module, both importing ``pytorch_lightning``,
defining a LightningModule and building a Trainer, then exiting) is started two ways, interleaved,
each round in a fresh interpreter: ported by the rule (``sed``: its files import
``ddpkit.lightning``) and run with ``python train.py``; and unchanged, run with ``python -m
ddpkit.lightning train.py``. Both import ddpkit.lightning and Lightning, so the difference is what
the runner does: find the script, port its imports and the project module's as they load. The
figure is the median of the per-round differences of the whole process's wall time (target
≤ 0.3 s); the medians of each side are printed beside it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODULE = """import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


CALLBACKS = [ModelCheckpoint()]
"""
SCRIPT = """import pytorch_lightning as pl
from project_module import CALLBACKS, Net

if __name__ == "__main__":
    trainer = pl.Trainer(logger=False, callbacks=CALLBACKS, enable_progress_bar=False)
    Net()
"""
TARGET = 0.3


def _write(folder: Path, ported: bool) -> Path:
    folder.mkdir()
    for name, text in (("project_module.py", MODULE), ("train.py", SCRIPT)):
        if ported:
            text = text.replace("pytorch_lightning", "ddpkit.lightning")
        (folder / name).write_text(text)
    return folder / "train.py"


def _time(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ported = _write(Path(tmp) / "ported", ported=True)
        unchanged = _write(Path(tmp) / "unchanged", ported=False)
        runs: dict[str, list[float]] = {"python train.py (ported)": [], "runner": []}
        _time([sys.executable, str(ported)], ported.parent)  # the file system warm, once
        for _ in range(args.rounds):
            runs["python train.py (ported)"].append(_time([sys.executable, "train.py"],
                                                          ported.parent))  # fmt: skip
            runs["runner"].append(_time([sys.executable, "-m", "ddpkit.lightning", "train.py"],
                                        unchanged.parent))  # fmt: skip
    added = [r - p for r, p in zip(runs["runner"], runs["python train.py (ported)"])]
    for name, times in runs.items():
        print(f"{name:28} median {statistics.median(times):.3f} s over {len(times)} rounds")
    median = statistics.median(added)
    met = "met" if median <= TARGET else "NOT met"
    print(f"python -m ddpkit.lightning adds {median:+.3f} s (min {min(added):+.3f}, max "
          f"{max(added):+.3f}); target ≤ {TARGET} s: {met}")  # fmt: skip


if __name__ == "__main__":
    main()
