"""The real torchrun (``python -m torch.distributed.run``) starts every rank; ddpkit starts none.

Each launch costs a torch import per process (about 2 s each on two cores): a handful only. The
one-machine launches are docs/launchers/torchrun.md's own commands, read from the page (which
marks them run here): their output is checked against the page's, and the ranks' reports here.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest
from clusters import (
    EXAMPLE,
    PYTHON,
    REPO,
    Started,
    assert_trained_together,
    clean_env,
    read_reports,
    run,
    two_hosts,
)

sys.path.insert(0, str(REPO / "tests" / "docs"))
from doc_blocks import Command, assert_transcript, console_commands

TORCHRUN = [PYTHON, "-m", "torch.distributed.run"]
PAGE = REPO / "docs" / "launchers" / "torchrun.md"
#: the page's commands on one machine, as written (its several-machine block is a bash one)
PAGE_COMMANDS = console_commands(PAGE)


# Without --standalone, as a user types it, torchrun meets on its default port 29500: one such
# launch at a time.
@pytest.mark.xdist_group("torchrun-default-port")
@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "command", PAGE_COMMANDS, ids=[f"{PAGE.name}:{c.line}" for c in PAGE_COMMANDS]
)
def test_torchrun_two_ranks_train_together(tmp_path: Path, command: Command) -> None:
    assert len(PAGE_COMMANDS) == 2, "docs/launchers/torchrun.md's two commands are these runs"
    reports = tmp_path / "reports"
    words = shlex.split(command.text, comments=True)
    assert words[0] == "torchrun"
    # The page's command, with the set-up's torchrun, and the example's report folder added.
    words[0] = str(Path(PYTHON).parent / "torchrun")
    words += ["--report-dir", str(reports), "--root-dir", str(tmp_path / "run")]
    env = clean_env(tmp_path, PATH=f"{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}")
    torchrun = Started(words, env=env, log=tmp_path / "torchrun.log")
    try:
        finished = torchrun.wait(150).check()
    finally:
        torchrun.kill()
    if command.expected is not None:
        assert_transcript(f"{PAGE}:{command.line}", command.expected, finished.output)
    ranks = read_reports(reports)
    assert_trained_together(ranks, world_size=2)
    for rank in ranks:
        assert rank["environment"] == "TorchElasticEnvironment"
        assert rank["launcher"] == "external"
        assert rank["launcher_variables"]["LOCAL_WORLD_SIZE"] == "2"
    # The process tree: torchrun itself is the parent of both ranks, and no rank started a
    # process of its own (ddpkit launched nothing).
    assert {rank["ppid"] for rank in ranks} == {torchrun.pid}
    assert [rank["children"] for rank in ranks] == [[], []]
    assert "environment     torchelastic" in finished.output


@pytest.mark.timeout(240)
def test_torchrun_two_nodes_world_size_four(tmp_path: Path) -> None:
    """``torchrun --nnodes=2`` on two hosts (network namespaces; loopback where they cannot
    be made), two ranks per node: world size 4, the same weights everywhere."""
    reports = tmp_path / "reports"
    with two_hosts() as hosts:
        port = "29500" if hosts.namespaced else str(_free_port())
        nodes = []
        for node in (0, 1):
            command = hosts.on(node, [
                *TORCHRUN, "--nnodes=2", f"--node-rank={node}", "--nproc-per-node=2",
                f"--master-addr={hosts.addresses[0]}", f"--master-port={port}",
                str(EXAMPLE), "--accelerator", "cpu", "--devices", "2", "--num-nodes", "2",
                "--report-dir", str(reports), "--root-dir", str(tmp_path / "run"),
            ])  # fmt: skip
            log = tmp_path / f"node{node}.log"
            nodes.append(Started(command, env=clean_env(tmp_path), log=log))
        try:
            for started in nodes:
                started.wait(200).check()
        finally:
            for started in nodes:
                started.kill()
    ranks = read_reports(reports)
    assert_trained_together(ranks, world_size=4)
    assert [(r["node_rank"], r["local_rank"]) for r in ranks] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {r["environment"] for r in ranks} == {"TorchElasticEnvironment"}
    assert [r["children"] for r in ranks] == [[]] * 4
    # Each node's two ranks are children of that node's torchrun.
    assert ranks[0]["ppid"] == ranks[1]["ppid"] != ranks[2]["ppid"] == ranks[3]["ppid"]
    assert ranks[2]["main_address"] == hosts.addresses[0]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_helper_reports_failures(tmp_path: Path) -> None:
    """The helper the launches rely on fails loudly with the command's output."""
    finished = run([PYTHON, "-c", "print('boom'); raise SystemExit(3)"],
                   env=clean_env(tmp_path), log=tmp_path / "x.log", timeout=60)  # fmt: skip
    with pytest.raises(pytest.fail.Exception, match=r"exited 3:\nboom\n.*\ncontext"):
        finished.check(lambda: "context")
