"""A rank of Lightning's own spawn launcher (``ddpkit.lightning.Trainer(supervise=False)``) that
ended its stage well has no process group left when its interpreter is torn down: gloo's threads
holding tensors then made ranks die of SIGABRT now and then ("terminate called without an
active exception", pytorch/pytorch#179291; the suite's unsupervised mission run hit it in
``trainer.test``). Two stages, so four spawned ranks, each reporting at its exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lightning_scripts import run_lightning_script

pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")


@pytest.mark.timeout(300)
def test_a_spawned_rank_exits_without_its_process_group(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_lightning_script("lit_spawn_exit.py", out)
    assert len(result["tested"]) == 1
    exits = [json.loads(path.read_text()) for path in sorted(out.glob("exit-*.json"))]
    assert len(exits) == 4, exits  # two ranks for fit, two for test
    assert all(not e["group_up"] for e in exits), exits
