"""Two machines without a scheduler (docs/launchers/multinode.md): the user starts the script on
each with MASTER_ADDR, MASTER_PORT and NODE_RANK; ddpkit starts the other local rank of each."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from clusters import (
    EXAMPLE,
    PYTHON,
    Started,
    assert_trained_together,
    clean_env,
    read_reports,
    two_hosts,
)


@pytest.mark.timeout(240)
def test_manual_two_node_launch(tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    reports = tmp_path / "reports"
    with two_hosts() as hosts:
        record_property("hosts", hosts.why_loopback or f"namespaces {hosts.names}")
        port = "29500" if hosts.namespaced else str(_free_port())
        nodes = []
        for node in (0, 1):
            env = clean_env(
                tmp_path, MASTER_ADDR=hosts.addresses[0], MASTER_PORT=port, NODE_RANK=str(node)
            )
            command = hosts.on(node, [
                PYTHON, str(EXAMPLE), "--accelerator", "cpu", "--devices", "2", "--num-nodes", "2",
                "--report-dir", str(reports), "--root-dir", str(tmp_path / f"run{node}"),
            ])  # fmt: skip
            nodes.append(Started(command, env=env, log=tmp_path / f"node{node}.log"))
        try:
            for started in nodes:
                started.wait(200).check()
        finally:
            for started in nodes:
                started.kill()
    ranks = read_reports(reports)
    assert_trained_together(ranks, world_size=4)
    assert [(r["node_rank"], r["local_rank"]) for r in ranks] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {(r["environment"], r["launcher"]) for r in ranks} == {
        # each node's own process launches; the ranks it started launch nothing
        ("LocalEnvironment", "subprocess"),
        ("LocalEnvironment", "external"),
    }
    for first, second in (ranks[0:2], ranks[2:4]):
        # Each node's own process is its local rank 0 and started exactly one other rank.
        assert first["children"] == [second["pid"]] and second["ppid"] == first["pid"]
        assert second["children"] == []
    assert {r["main_address"] for r in ranks} == {hosts.addresses[0]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
