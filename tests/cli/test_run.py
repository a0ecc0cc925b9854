"""``ddpkit run``'s command line and the environment it gives each rank (no rank starts here:
tests/integration/test_ddpkit_run.py runs real ones)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ddpkit._runtime.launch._run_job import RunSpec, rank_command, run_env
from ddpkit.cli import main

Capture = pytest.CaptureFixture[str]
CAPTURED = Path(__file__).parents[1] / "plugins" / "environments" / "torchrun_variables.json"


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--nnodes", "2", "{script}"], "--nnodes=2 needs --master-addr and --master-port"),
        (["--nnodes", "2", "--node-rank", "2", "{script}"],
         "--node-rank=2 with --nnodes=2: the node rank is one of 0..1"),
        (["--nproc-per-node", "0", "{script}"], "--nproc-per-node=0: at least 1 is needed"),
        (["--nnodes", "2", "--master-addr", "a", "--master-port", "1", "--max-restarts", "1",
          "{script}"], "--max-restarts=1 with --nnodes=2: a restart starts the ranks of this node only"),
        (["missing.py"], "'missing.py' is not a file"),
    ],
)  # fmt: skip
def test_usage_errors_name_the_numbers(
    tmp_path: Path, capsys: Capture, argv: list[str], problem: str
) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    code = main(["run", *(a.replace("{script}", str(script)) for a in argv)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("ddpkit run ")
    assert problem in err
    assert err.rstrip().endswith("Fix: ddpkit run --help")


def test_the_scripts_own_options_pass_through() -> None:
    spec = RunSpec(target="train.py", args=("--lr", "0.1", "--nproc-per-node", "9"))
    command = rank_command(spec)
    assert command[:4] == [sys.executable, "-u", "-m", "ddpkit._runtime.ranks._run_rank"]
    assert command[4:] == [str(Path("train.py").resolve()), "--lr", "0.1", "--nproc-per-node", "9"]
    assert rank_command(RunSpec(target="pkg.train", module=True))[4:] == ["-m", "pkg.train"]


def test_every_variable_torchrun_gives_a_worker() -> None:
    """The variables real torchrun workers got (captured), with the same meaning: node 1 of 2,
    two ranks per node, local rank 1, third attempt."""
    captured = json.loads(CAPTURED.read_text())
    torchrun = {k for ranks in captured.values() if isinstance(ranks, dict)
                for env in ranks.values() for k in env}  # fmt: skip
    spec = RunSpec(target="t.py", nproc_per_node=2, nnodes=2, node_rank=1,
                   master_addr="node0", master_port=29500, max_restarts=3)  # fmt: skip
    env = run_env(spec, {}, local_rank=1, port=29500, attempt=2, run_id="abc")
    # TORCHELASTIC_ERROR_FILE is a file of the job's scratch folder: the job adds it.
    assert torchrun - {"TORCHELASTIC_ERROR_FILE"} <= env.keys(), torchrun - env.keys()
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS")} == {
        "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "node0", "MASTER_PORT": "29500",
        "TORCHELASTIC_RESTART_COUNT": "2", "TORCHELASTIC_MAX_RESTARTS": "3",
    }  # fmt: skip
    # The user's OMP_NUM_THREADS is kept; otherwise one thread per rank, as torchrun sets.
    assert run_env(spec, {"OMP_NUM_THREADS": "4"}, local_rank=0, port=1, attempt=0,
                   run_id="x")["OMP_NUM_THREADS"] == "4"  # fmt: skip
    assert env["OMP_NUM_THREADS"] == "1"
    # Python's faulthandler is on in each rank unless the user said otherwise ("" is off).
    assert env["PYTHONFAULTHANDLER"] == "1"
    assert run_env(spec, {"PYTHONFAULTHANDLER": ""}, local_rank=0, port=1, attempt=0,
                   run_id="x")["PYTHONFAULTHANDLER"] == ""  # fmt: skip
