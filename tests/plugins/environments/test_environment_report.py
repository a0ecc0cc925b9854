"""`ddpkit env` names the detected environment and the variables that decided it."""

from __future__ import annotations

import json

import pytest
from captured import mpi, slurm, torchrun

from ddpkit.cli import main


def _report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str]
) -> dict[str, object]:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["env", "--json"]) == 0
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    return report


def test_srun_task(no_launcher: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(no_launcher, capsys, slurm("two_nodes_1x2", "1"))
    assert report["environment"] == "slurm"
    variables = report["environment_variables"]
    assert isinstance(variables, dict)
    assert variables["SLURM_STEP_NUM_TASKS"] == "2" and variables["SLURM_PROCID"] == "1"
    assert variables["SLURM_NODELIST"] == "dkn[1-2]"
    assert variables["SLURM_TASKS_PER_NODE"] == "1(x2)"


def test_batch_step(no_launcher: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(no_launcher, capsys, slurm("sbatch_batch"))
    assert report["environment"] == "local"
    assert "batch step" in str(report["environment_reason"])
    variables = report["environment_variables"]
    assert isinstance(variables, dict)
    assert variables["SLURM_NTASKS"] == "2" and "SLURM_STEP_ID" not in variables


def test_torchrun(no_launcher: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    env = torchrun("torchrun_nnodes2", "1")
    report = _report(no_launcher, capsys, env)
    assert report["environment"] == "torchelastic"
    assert report["environment_variables"] == {
        k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE")
    } | {"TORCHELASTIC_RUN_ID": "none"}


def test_manual_node(no_launcher: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29500", "NODE_RANK": "1"}
    report = _report(no_launcher, capsys, env)
    assert report["environment"] == "local"
    assert report["environment_variables"] == env
    assert "one node of several" in str(report["environment_reason"])


def test_plain_text(no_launcher: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for key, value in slurm("srun_ntasks2", "1").items():
        no_launcher.setenv(key, value)
    assert main(["env"]) == 0
    lines = capsys.readouterr().out.splitlines()
    [line] = [x for x in lines if x.startswith("environment_variables")]
    assert "SLURM_STEP_ID=0" in line and "SLURM_PROCID=1" in line
    [line] = [x for x in lines if x.split()[0] == "environment"]
    assert line.split()[1] == "slurm"


def test_mpirun_process(
    no_launcher: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = mpi("mpich_n2", "1")
    report = _report(no_launcher, capsys, env)
    assert report["environment"] == "mpi"
    assert report["environment_variables"] == {
        k: env[k] for k in ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")
    }


def test_kubeflow_pod(no_launcher: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"KUBERNETES_PORT": "tcp://10.96.0.1:443", "MASTER_ADDR": "job-master-0",
           "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1"}  # fmt: skip
    report = _report(no_launcher, capsys, env)
    assert report["environment"] == "kubeflow"
    assert report["environment_variables"] == env


def test_jsrun_task(no_launcher: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"LSB_JOBID": "7", "LSB_DJOB_RANKFILE": "/nonexistent/rankfile",
           "JSM_NAMESPACE_LOCAL_RANK": "0", "JSM_NAMESPACE_SIZE": "2", "JSM_NAMESPACE_RANK": "0"}  # fmt: skip
    report = _report(no_launcher, capsys, env)
    assert report["environment"] == "lsf"
    assert report["environment_variables"] == env
