"""A real SLURM cluster (slurm-wlm, started by scripts/slurm/up.sh for this module and stopped
after it): srun's tasks are the ranks; the batch step is not rank 0 of N; two nodes over two
network namespaces."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusters import (
    EXAMPLE,
    PYTHON,
    REPO,
    SlurmCluster,
    assert_trained_together,
    read_reports,
    run,
    slurm_cluster,
    two_hosts,
)

# The sbatch script of docs/launchers/slurm.md, as the page shows it.
_DOC = REPO / "docs" / "launchers" / "slurm.md"
_SCRIPT = re.compile(r"<!-- not-run:[^\n]*test_slurm_cluster\.py[^\n]*-->\n```bash\n(.*?)```", re.S)
# Every launch is bounded by SLURM itself too (minutes), so nothing outlives a failed test.
_LIMIT = "--time=3"
# srun gives up when SLURM cannot place the step at once, instead of waiting in the queue.
_NOW = "--immediate=30"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as running:
        yield running


def _example(reports: Path, tmp: Path, *flags: str) -> list[str]:
    return [
        PYTHON, str(EXAMPLE), *flags, "--report-dir", str(reports), "--root-dir", str(tmp / "run"),
    ]  # fmt: skip


def _job_log(tmp: Path) -> str:
    path = tmp / "job.log"
    return path.read_text(errors="replace") if path.exists() else "(no job log)\n"


def _known_variables() -> set[str]:
    """The variable names of the srun task captured for the unit tests."""
    import json

    data = json.loads((REPO / "tests/plugins/environments/slurm_variables.json").read_text())
    return set(data["srun_ntasks2"]["1"])


@pytest.mark.xdist_group("slurm")
@pytest.mark.timeout(180)
def test_srun_two_tasks_are_the_ranks(cluster: SlurmCluster, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    command = [
        "srun", "--ntasks=2", "--kill-on-bad-exit=1", _LIMIT, _NOW,
        *_example(reports, tmp_path, "--accelerator", "cpu", "--devices", "2"),
    ]  # fmt: skip
    finished = run(
        command,
        env=cluster.env(tmp_path),
        log=tmp_path / "srun.log",
        timeout=120,
        context=cluster.diagnostics,
    )
    finished.check(cluster.diagnostics)
    ranks = read_reports(reports)
    assert_trained_together(ranks, world_size=2)
    assert {(r["environment"], r["launcher"]) for r in ranks} == {("SLURMEnvironment", "external")}
    assert [r["children"] for r in ranks] == [[], []]  # ddpkit started nothing
    variables = ranks[1]["launcher_variables"]
    assert variables["SLURM_PROCID"] == "1" and variables["SLURM_STEP_NUM_TASKS"] == "2"
    # The unit tests' captured variables are still what this SLURM gives a task.
    assert {k for k in variables if k.startswith("SLURM")} - {"SLURM_CONF"} == _known_variables()


@pytest.mark.xdist_group("slurm")
@pytest.mark.timeout(60)
def test_a_batch_job_that_fails_fails_the_sbatch_helper(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    """The sbatch tests' helper reads the job's end from scontrol: a failing job is a failure."""
    args = [_LIMIT, f"--output={tmp_path / 'job.log'}", "--wrap", "exit 3"]
    finished = cluster.sbatch(
        args, env=cluster.env(tmp_path), log=tmp_path / "sbatch.log", timeout=50
    )
    assert finished.returncode == 3


@pytest.mark.xdist_group("slurm")
@pytest.mark.timeout(180)
def test_sbatch_script_from_the_docs(cluster: SlurmCluster, tmp_path: Path) -> None:
    [script] = _SCRIPT.findall(_DOC.read_text())
    path = tmp_path / "train.sbatch"
    path.write_text(script)
    reports = tmp_path / "reports"
    env = cluster.env(tmp_path, PATH=f"{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}")
    # This cluster has one node of two cores: the command line beats the #SBATCH lines.
    args = [
        "--nodes=1", "--cpus-per-task=1", _LIMIT, f"--output={tmp_path / 'job.log'}", str(path),
        "--report-dir", str(reports), "--root-dir", str(tmp_path / "run"),
    ]  # fmt: skip
    finished = cluster.sbatch(args, env=env, log=tmp_path / "sbatch.log", timeout=120)
    finished.check(lambda: _job_log(tmp_path) + cluster.diagnostics())
    ranks = read_reports(reports)
    assert_trained_together(ranks, world_size=2)
    assert {r["environment"] for r in ranks} == {"SLURMEnvironment"}


@pytest.mark.xdist_group("slurm")
@pytest.mark.timeout(180)
def test_batch_step_is_not_rank_zero_of_two(cluster: SlurmCluster, tmp_path: Path) -> None:
    """``sbatch --ntasks=2`` whose script runs python itself: that one process sees
    SLURM_NTASKS=2 and SLURM_PROCID=0; it must not wait for a rank 1 that never comes."""
    reports = tmp_path / "reports"
    train = _example(reports, tmp_path, "--accelerator", "cpu", "--devices", "2")
    args = ["--ntasks=2", _LIMIT, f"--output={tmp_path / 'job.log'}", "--wrap", " ".join(train)]
    finished = cluster.sbatch(
        args, env=cluster.env(tmp_path), log=tmp_path / "sbatch.log", timeout=120
    )
    finished.check(lambda: _job_log(tmp_path) + cluster.diagnostics())
    log = _job_log(tmp_path)
    ranks = read_reports(reports)
    assert_trained_together(ranks, world_size=2)
    assert {(r["environment"], r["launcher"]) for r in ranks} == {
        # each node's own process launches; the ranks it started launch nothing
        ("LocalEnvironment", "subprocess"),
        ("LocalEnvironment", "external"),
    }
    assert ranks[0]["children"] == [ranks[1]["pid"]]  # ddpkit started rank 1 itself
    assert ranks[0]["launcher_variables"]["SLURM_NTASKS"] == "2"
    assert "SLURM_STEP_ID" not in ranks[0]["launcher_variables"]
    assert "SLURM batch step of job" in log  # the plan's reason
    assert "srun did not start this process" in log  # the warning


@pytest.fixture(scope="module")
def two_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    folder = tmp_path_factory.mktemp("slurm2")
    with two_hosts(require_namespaces=True) as hosts, slurm_cluster(folder, hosts) as running:
        yield running


@pytest.mark.xdist_group("slurm")
@pytest.mark.timeout(180)
def test_two_node_step(two_node_cluster: SlurmCluster, tmp_path: Path) -> None:
    """One task on each of two nodes (two network namespaces): compressed node list and task
    counts, node ranks, and rank 0's host as the main address."""
    cluster = two_node_cluster
    assert cluster.hosts is not None
    reports = tmp_path / "reports"
    train = _example(
        reports, tmp_path, "--accelerator", "cpu", "--devices", "1", "--num-nodes", "2"
    )
    command = cluster.client(
        ["srun", "--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", _LIMIT, _NOW, *train]
    )
    finished = run(
        command,
        env=cluster.env(tmp_path),
        log=tmp_path / "srun.log",
        timeout=120,
        context=cluster.diagnostics,
    )
    finished.check(cluster.diagnostics)
    ranks = read_reports(reports)
    assert_trained_together(ranks, world_size=2)
    first = cluster.hosts.names[0]
    prefix = first[:-1]  # the names are <tag>n1 and <tag>n2
    for rank, node in zip(ranks, (0, 1)):
        assert rank["environment"] == "SLURMEnvironment"
        assert rank["node_rank"] == node and rank["local_rank"] == 0
        assert rank["main_address"] == first
        variables = rank["launcher_variables"]
        assert variables["SLURM_NODELIST"] == f"{prefix}[1-2]"
        assert variables["SLURM_TASKS_PER_NODE"] == "1(x2)"
        assert variables["SLURMD_NODENAME"] == cluster.hosts.names[node]  # a task per node
