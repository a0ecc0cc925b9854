"""A standalone test whose Trainer's rank fails, as pytest reports it with ddpkit's plugin: the
root cause with the user's frame first, each rank's traceback once, the frames of ddpkit and
torch left out, the other rank in one line — as the launchers say it to a script."""

from __future__ import annotations

import re
import textwrap

import pytest

PLUGIN = ("-p", "ddpkit.testing.pytest_plugin", "-p", "no:cacheprovider")

TESTS = """
    import pytest
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    import ddpkit
    from ddpkit import DDPPlugin, Trainer


    class Model(ddpkit.Module):
        def __init__(self, failing):
            super().__init__()
            self.net = nn.Linear(4, 2)
            self.failing = failing

        def training_step(self, batch, batch_idx):
            if self.global_rank == self.failing and batch_idx == 1:
                raise ValueError(f"rank {self.global_rank} cannot go on")
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)


    @pytest.mark.standalone(timeout=120)
    @pytest.mark.parametrize("failing", [1, 0])
    def test_fit(tmp_path, failing):
        x = torch.randn(64, 4)
        data = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)
        trainer = Trainer(num_processes=2, plugins=[DDPPlugin(find_unused_parameters=False)],
                          max_steps=4, default_root_dir=tmp_path, enable_progress_bar=False,
                          enable_model_summary=False, logger=False, enable_checkpointing=False)
        trainer.fit(Model(failing), data)
"""


def _section(out: str, name: str) -> list[str]:
    """The lines of one test's failure report, without pytest's captured-output sections."""
    start = out.index(f"_ test_fit[{name}] _")
    end = min(i for i in (out.find("_ test_fit[", start + 10), out.find("= short test summary"))
              if i > 0)  # fmt: skip
    lines = out[start:end].splitlines()[1:]
    captured = next((i for i, line in enumerate(lines) if line.startswith("----")), len(lines))
    return lines[:captured]


@pytest.mark.timeout(300)
def test_a_failing_rank_reads_as_the_launchers_say_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fit=textwrap.dedent(TESTS))
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=280)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "ddpkit: the other processes of this test" not in out  # the error says it all
    for failing in ("1", "0"):
        lines = _section(out, failing)
        text = "\n".join(lines)
        assert len(lines) <= 50, text
        assert not [line for line in lines if re.search(r"/ddpkit/\S+\.py:\d+", line)], text
        assert text.count('raise ValueError(f"rank {self.global_rank} cannot go on")') <= 2
        assert text.count("Traceback (most recent call last)") <= 1, text
        assert "DDPKIT_VERBOSE=1" in text, text  # says how to see every frame
    # Under the test's own line that called fit: the root cause, then where the user's code
    # raised (no frame of ddpkit's between them, and none after).
    lines = _section(out, "1")
    called = lines.index(">       trainer.fit(Model(failing), data)")
    assert lines[called + 1].endswith(
        "is the root cause, raised ValueError: rank 1 cannot go on."
    ), lines
    assert "in training_step: raise ValueError(" in lines[called + 2]
    assert "this process; ended by ddpkit after rank 1 failed" in out
