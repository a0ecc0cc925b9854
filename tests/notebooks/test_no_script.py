"""The other sessions without a script to re-run: ``python -c`` and a script piped to
``python -`` (whose ``__file__`` is ``"<stdin>"``) train 1.x's call on forked ranks, as a
notebook does, instead of failing in each rank on a file that does not exist."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROGRAM = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    import ddpkit

    class Net(ddpkit.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    x = torch.randn(64, 4)
    trainer = ddpkit.Trainer(accelerator="ddp_cpu", num_processes=2, max_epochs=1,
                             enable_progress_bar=False, logger=False, enable_checkpointing=False)
    trainer.fit(Net(), DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8))
    print("global_step", trainer.global_step)
    """
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["python -", "python -c"])
def test_a_session_without_a_script_forks_the_ranks(tmp_path: Path, how: str) -> None:
    argv, stdin = (
        ([sys.executable, "-"], PROGRAM)
        if how == "python -"
        else ([sys.executable, "-c", PROGRAM], None)
    )
    done = subprocess.run(
        argv, input=stdin, cwd=tmp_path, capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "global_step 4" in done.stdout  # 64 rows / 2 ranks / 8 a batch
    assert "so the ranks are forked from it, as strategy='ddp_notebook' does" in done.stderr
