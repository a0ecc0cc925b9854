"""``python -m ddpkit.lightning SCRIPT ARGS`` runs a 1.x project unchanged — its script and the
project's own module both import ``pytorch_lightning`` — on two CPU ranks, under both 1.x
launchers (``accelerator="ddp_cpu"``'s spawn and ``DDPPlugin``'s re-run of the command), as 1.x
ran it: ``prepare_data`` ran in the launching process under spawn (1.0–1.5's
``Trainer._run`` before ``mp.spawn``), ``trainer.test(ckpt_path="best")`` loads the run's own
checkpoint whose hyperparameters hold an ``nn.Module``, ``load_from_checkpoint`` works on an
instance, ``to_torchscript`` works; nothing is left running."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from fault_scripts.harness import session_pids

PROJECT = Path(__file__).parent / "scripts" / "one_x_project"
FLAGS = {
    "spawn": ["--accelerator", "ddp_cpu", "--num_processes", "2"],
    "ddp_plugin": ["--accelerator", "ddp_cpu", "--num_processes", "2", "--ddp_plugin"],
}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("launcher", sorted(FLAGS))
def test_an_unchanged_1x_project_runs_on_two_ranks(tmp_path: Path, launcher: str) -> None:
    command = [sys.executable, "-m", "ddpkit.lightning", "train_1x.py", "--out", str(tmp_path),
               "--max_epochs", "2", *FLAGS[launcher]]  # fmt: skip
    proc = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    _out, err = proc.communicate(timeout=220)
    assert proc.returncode == 0, err[-4000:]
    assert not session_pids(proc.pid), "a process of the run outlived it"
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["world_size"] == 2
    assert result["global_step"] == 2 * 32 // 4 // 2  # 2 epochs, 8 batches over 2 ranks
    assert result["steps_seen"] == 4.0  # training_epoch_end got each step's output
    assert result["best"].endswith(".ckpt")
    assert isinstance(result["tested"], float)
    assert (result["loaded"], result["backbone"]) == ("Net", "Linear")
    assert result["scripted"] == "RecursiveScriptModule"
    assert "Traceback" not in err
    seen = {p.name: p.read_text() for p in tmp_path.glob("scale_rank*_fit")}
    # spawn: prepared once, before the ranks; DDPPlugin: by local rank 0 in its own process
    rank1 = "3.0" if launcher == "spawn" else "1.0"
    assert seen == {"scale_rank0_fit": "3.0", "scale_rank1_fit": rank1}
