"""What a user reads when a rank of their 2-rank fit raises: a script of theirs, run as they would
(``python train.py`` into a pipe), read back whole.

The report starts with the root cause (their frame and message in its first lines), shows each
rank's traceback once with the frames of ddpkit and torch folded, gives every other rank one
line, and ends with how to see every frame — for both launchers, rank 1 or rank 0 failing; and
an unused parameter is named by its name, with the fix, before anything of torch's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ddpkit._tracebacks import fold_hint

pytestmark = pytest.mark.timeout(180)

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    import ddpkit
    from ddpkit import Trainer

    STRATEGY, FAILING = sys.argv[1], int(sys.argv[2])


    class Classifier(ddpkit.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(2, 2)
            if FAILING == -1:
                self.aux_head = nn.Linear(2, 2)  # never used in the loss

        def training_step(self, batch, batch_idx):
            x, y = batch
            if self.global_rank == FAILING and batch_idx == 2:
                raise ValueError(f"bad batch {batch_idx} on rank {self.global_rank}")
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)


    if __name__ == "__main__":
        x = torch.randn(64, 2)
        data = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)
        trainer = Trainer(accelerator="cpu", devices=2, strategy=STRATEGY, max_epochs=1,
                          enable_model_summary=False, logger=False, enable_checkpointing=False)
        trainer.fit(Classifier(), data)
""")

RAISE = 'raise ValueError(f"bad batch {batch_idx} on rank {self.global_rank}")'
RAISE_LINE = next(i for i, line in enumerate(SCRIPT.splitlines(), 1) if RAISE in line)


def _run(tmp_path: Path, strategy: str, failing: int) -> tuple[int, list[str]]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "DDPKIT_VERBOSE"}
    done = subprocess.run(
        [sys.executable, str(script), strategy, str(failing)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    return done.returncode, (done.stdout + done.stderr).splitlines()


@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_rank_1_failing_reads_root_cause_first_in_few_lines(tmp_path: Path, strategy: str) -> None:
    code, lines = _run(tmp_path, strategy, failing=1)
    text = "\n".join(lines)
    assert code == 1, text
    assert len(lines) <= 50, text  # it was 137
    # The root cause, with the user's frame and message, in the first lines.
    head = "\n".join(lines[:8])
    assert "is the root cause, raised ValueError: bad batch 2 on rank 1." in head, text
    assert f"train.py:{RAISE_LINE}, in training_step: {RAISE}" in head, text
    # Rank 1's traceback once (the line that raised: in the head, and in it), its frames of
    # ddpkit and torch folded; rank 0 in one line.
    assert text.count("ValueError: bad batch 2 on rank 1") == 2, text
    assert text.count(RAISE) == 2, text
    assert text.count("Traceback (most recent call last)") == 2, text  # rank 0's own: 3 lines
    assert not any(line.lstrip().startswith('File "') and "/ddpkit/" in line for line in lines)
    assert "[rank" not in text  # no line prefixed by torch's excepthook
    assert any(
        line.startswith("rank 0 (pid ") and line.endswith("after rank 1 failed") for line in lines
    ), text
    assert lines[-1] == fold_hint()


@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_rank_0_failing_reads_the_same(tmp_path: Path, strategy: str) -> None:
    code, lines = _run(tmp_path, strategy, failing=0)
    text = "\n".join(lines)
    assert code == 1, text
    assert len(lines) <= 25, text
    assert text.count(RAISE) <= 2, text
    assert text.count("Traceback (most recent call last)") <= 2, text
    assert not any(line.lstrip().startswith('File "') and "/ddpkit/" in line for line in lines)
    assert "[rank" not in text
    # rank 1 said nothing of its own: one line about it, from rank 0's side
    assert sum("rank 1 (pid " in line for line in lines) == 1, text
    assert lines[-1] == fold_hint()
    if strategy == "ddp":  # rank 0 is this process: its own error, as raised, with notes
        assert "ValueError: bad batch 2 on rank 0" in lines[-3], text
        assert "after rank 0 failed (ValueError: bad batch 2 on rank 0)" in lines[-2]


def test_an_unused_parameter_is_named_first_with_the_fix(tmp_path: Path) -> None:
    # FAILING=-1: no rank raises; aux_head takes no part in the loss
    code, lines = _run(tmp_path, "ddp_find_unused_parameters_false", failing=-1)
    text = "\n".join(lines)
    assert code == 1, text
    assert len(lines) <= 20, text
    error = next(i for i, line in enumerate(lines) if "UnusedParametersError: " in line)
    assert (
        "UnusedParametersError: DDPPlugin(find_unused_parameters=False): aux_head.weight and "
        "aux_head.bias took no part in the loss of training_step on rank "
    ) in lines[error], text
    # Whichever rank the report blames (each raised it), the fix comes before torch's words.
    fix = lines.index(
        "Fix: pass strategy='ddp_find_unused_parameters_true' (or "
        "plugins=[DDPPlugin(find_unused_parameters=True)]); or use every parameter in the loss."
    )
    torch_said = next(i for i, line in enumerate(lines) if line.startswith("(torch's error: "))
    assert error < fix < torch_said, text
    assert "Parameter indices" not in text and "torch/nn/parallel" not in text
