"""A second ``trainer.fit`` on the same Trainer, under ``DDPSpawnPlugin`` (Lightning 1.x's
``ddp_cpu`` default), continues as it does under ``DDPPlugin`` — where the calling process is
rank zero, so its Trainer is Lightning's own — instead of Lightning 2.x's spawn refusal
(``NotImplementedError``, its issue #18775). Lightning's MNIST hello-world fits twice.

Each run is ``scripts/lit_second_fit.py`` (two CPU ranks, three ``fit`` calls: one epoch, one
with nothing left to do, one more epoch) in a process of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from lightning_scripts import run_lightning_script

pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")


def run_script(out: Path, plugin: str) -> dict[str, Any]:
    return run_lightning_script("lit_second_fit.py", out, "--plugin", plugin)


@pytest.mark.timeout(240)
def test_a_second_fit_under_spawn_continues_as_under_ddp_plugin(tmp_path: Path) -> None:
    spawned = run_script(tmp_path / "spawn", "DDPSpawnPlugin")
    reference = run_script(tmp_path / "subprocess", "DDPPlugin")

    # Where each fit ended: the second had nothing left to do, the third trained one epoch more,
    # from the weights the first left, on the same batches.
    counters = [(f["global_step"], f["current_epoch"]) for f in spawned["fits"]]
    assert counters == [(f["global_step"], f["current_epoch"]) for f in reference["fits"]]
    assert counters == [(6, 1), (6, 1), (12, 2)]
    for ours, theirs in zip(spawned["fits"], reference["fits"], strict=True):
        for name, value in theirs["weights"].items():
            torch.testing.assert_close(ours["weights"][name], value, rtol=1e-5, atol=1e-6)

    # The callbacks went on from their state: one best checkpoint kept (save_top_k=1), the
    # first fit's removed; early stopping's best score and patience.
    assert spawned["checkpoints"] == reference["checkpoints"] == [spawned["best_model_path"]]
    assert spawned["best_k_models"] == reference["best_k_models"]
    assert spawned["stopping"] == reference["stopping"]
    assert [r["step"] for r in spawned["rows"]] == [r["step"] for r in reference["rows"]]
