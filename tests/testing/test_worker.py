"""What an isolated test's interpreters are told, and what they leave for the parent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddpkit.testing._distributed import ENV_STORE_FD, rank_environment
from ddpkit.testing._worker import (
    ENV_CHILD,
    ENV_DIR,
    ENV_LOG,
    ENV_PARENT,
    IsolatedProcess,
    child_environment,
    read_records,
)


def test_child_environment_adds_only_its_variables(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "PYTEST_CURRENT_TEST": "t.py::test_a (call)"}
    env = child_environment(base, directory=tmp_path, parent_pid=42, log=tmp_path / "r0.log")
    assert env == {
        "PATH": "/bin",
        ENV_CHILD: "1",
        ENV_DIR: str(tmp_path),
        ENV_PARENT: "42",
        ENV_LOG: str(tmp_path / "r0.log"),
        "PYTHONUNBUFFERED": "1",
        "PYTEST_DEBUG_TEMPROOT": str(tmp_path / "tmp"),
    }
    assert base == {"PATH": "/bin", "PYTEST_CURRENT_TEST": "t.py::test_a (call)"}


def test_rank_environment() -> None:
    env = rank_environment(
        {"PATH": "/bin", ENV_STORE_FD: "9"},
        rank=1,
        world_size=2,
        port=5555,
        store_fd=None,
        cpu_count=8,
    )
    assert env == {
        "PATH": "/bin",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "5555",
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "OMP_NUM_THREADS": "4",
    }
    rank0 = rank_environment(
        {"OMP_NUM_THREADS": "1"}, rank=0, world_size=4, port=1, store_fd=7, cpu_count=2
    )
    assert rank0[ENV_STORE_FD] == "7"
    assert rank0["OMP_NUM_THREADS"] == "1"  # the user's choice stands


def test_not_a_child_without_the_variables() -> None:
    assert IsolatedProcess.from_env({}) is None
    assert IsolatedProcess.from_env({ENV_CHILD: "1"}) is None


def test_direct_child_and_rank_started_by_the_test(tmp_path: Path) -> None:
    env = {ENV_CHILD: "1", ENV_DIR: str(tmp_path), ENV_LOG: str(tmp_path / "rank0.log")}
    direct = IsolatedProcess.from_env({**env, ENV_PARENT: str(os.getppid())})
    assert direct == IsolatedProcess(
        directory=tmp_path, parent_pid=os.getppid(), rank=0, direct=True, log=tmp_path / "rank0.log"
    )
    # A DDPPlugin rank inherits the variables, but its parent is rank 0, not the parent pytest.
    rank1 = IsolatedProcess.from_env({**env, ENV_PARENT: "1", "LOCAL_RANK": "1"})
    assert rank1 is not None
    assert (rank1.rank, rank1.direct) == (1, False)
    assert rank1.log == tmp_path / f"rank1-{os.getpid()}.log"


def test_records_round_trip(tmp_path: Path) -> None:
    child = IsolatedProcess(
        directory=tmp_path, parent_pid=1, rank=3, direct=False, log=tmp_path / "x.log"
    )
    child.register()
    child.record_report({"outcome": "passed", "when": "setup"})
    child.record_report({"outcome": "failed", "when": "call"})
    child.mark_arrived()
    record = read_records(tmp_path)[os.getpid()]
    assert (record.rank, record.direct, record.log, record.arrived) == (
        3,
        False,
        tmp_path / "x.log",
        True,
    )
    assert [r["outcome"] for r in record.reports] == ["passed", "failed"]


def test_a_report_line_cut_short_by_a_kill_is_dropped(tmp_path: Path) -> None:
    (tmp_path / "proc-7.json").write_text(json.dumps({"pid": 7, "rank": 0, "log": "l"}))
    (tmp_path / "report-7.jsonl").write_text('{"outcome": "passed"}\n{"outc')
    (tmp_path / "proc-8.json").write_text("{not json")
    records = read_records(tmp_path)
    assert list(records) == [7]
    assert records[7].reports == ({"outcome": "passed"},)
    assert not records[7].arrived


@pytest.mark.parametrize(("env", "rank"), [({"RANK": "2"}, 2), ({"LOCAL_RANK": "1"}, 1), ({}, 0)])
def test_rank_comes_from_rank_then_local_rank(
    tmp_path: Path, env: dict[str, str], rank: int
) -> None:
    child = IsolatedProcess.from_env({ENV_CHILD: "1", ENV_DIR: str(tmp_path), **env})
    assert child is not None and child.rank == rank
