"""``ddpkit explain`` and ``ddpkit env``, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddpkit.cli import main

Run = subprocess.CompletedProcess[str]


def test_explain_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["explain", "--accelerator", "ddp_cpu", "--num-processes", "2",
         "--plugins", "ddp_find_unused_parameters_false"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "training_type   ddp(find_unused_parameters=False)" in out
    assert "launcher        subprocess" in out
    assert (
        "modern call     Trainer(accelerator='cpu', devices=2, "
        "strategy='ddp_find_unused_parameters_false')" in out
    )


def test_explain_shows_the_deprecation_as_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--accelerator", "ddp_cpu", "--num-processes", "2"]) == 0
    out = capsys.readouterr().out
    assert "deprecated:" in out and "strategy='ddp_spawn_find_unused_parameters_true'" in out


def test_explain_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--devices", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["launcher"]["value"] == "subprocess"
    assert data["devices"]["indices"] == [0, 1]


def test_explain_bad_flags_exit_2_with_the_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--strategy", "dp"]) == 2
    err = capsys.readouterr().err
    assert "strategy='dp' is not supported" in err


def test_env_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.setenv(key, "0" if "RANK" in key else "1")
    assert main(["env", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["environment"] == "torchelastic"
    assert data["environment_variables"]["WORLD_SIZE"] == "1"
    assert data["cuda_device_count"] == 0


@pytest.mark.timeout(60)
def test_console_entry_points() -> None:
    """`python -m ddpkit` and the installed `ddpkit` script both work."""
    run: Run = subprocess.run(
        [sys.executable, "-m", "ddpkit", "explain", "--num-processes", "2"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "training_type   ddp_spawn" in run.stdout
    script = subprocess.run(
        [str(Path(sys.executable).with_name("ddpkit")), "env"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert script.returncode == 0, script.stderr
    assert "environment" in script.stdout
