"""The plugin end to end, with pytester: a pytest run of small test files, as a user's suite would
run them (``-p ddpkit.testing.pytest_plugin``), judged by its outcomes, its output and the
processes it leaves.

Every isolated test starts interpreters that import torch (seconds each on two cores), so each
scenario is one pytest run holding several tests.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from ddpkit._runtime.ranks._scratch import PREFIX
from ddpkit.utilities import _procs as procs

PLUGIN = ("-p", "ddpkit.testing.pytest_plugin", "-p", "no:cacheprovider", "-rA")


def write(pytester: pytest.Pytester, name: str, source: str) -> None:
    pytester.makepyfile(**{name: textwrap.dedent(source)})


def pids_in(path: Path) -> list[int]:
    return [int(line.split()[-1]) for line in path.read_text().splitlines()]


# -- teardown: process groups and child processes ----------------------------------------------

LEAKS = """
    import subprocess, sys
    import torch.distributed as dist

    def test_leaves_a_group():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)

    def test_next_test_starts_clean():
        assert not dist.is_initialized()

    def test_leaves_a_child():
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open({pidfile!r}, "w") as fh:
            fh.write(str(proc.pid))
"""


def test_a_leaked_group_is_destroyed_and_strict_mode_reports_the_test(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    write(pytester, "test_leaks", LEAKS.format(pidfile=str(pidfile)))

    result = pytester.runpytest_inprocess(*PLUGIN, "--ddpkit-strict-leaks")
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaves_a_group*",
            "test_leaks.py::test_leaves_a_group left a torch.distributed process group "
            "initialized (backend gloo, world size 1, rank 0); ddpkit destroyed it after the "
            "test. Fix: call torch.distributed.destroy_process_group()*",
            "*ERROR at teardown of test_leaves_a_child*",
            "test_leaks.py::test_leaves_a_child left 1 child process running 3 s after it "
            "returned; ddpkit ended it:",
            f"  pid {pidfile.read_text()}: *python* -c import time; time.sleep(120)",
        ]
    )
    assert not procs.is_running(int(pidfile.read_text()))

    # Not strict: the group is destroyed (the next test starts clean) and the summary says who.
    result = pytester.runpytest_inprocess(*PLUGIN, "-k", "group or clean")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*ddpkit: process groups left initialized (destroyed)*",
            "test_leaks.py::test_leaves_a_group",
        ]
    )
    # The ini option is strict too.
    result = pytester.runpytest_inprocess(*PLUGIN, "-o", "ddpkit_strict_leaks=true", "-k", "group")
    result.assert_outcomes(passed=1, errors=1)


# -- standalone ---------------------------------------------------------------------------------

OUTCOMES = """
    import os
    import pytest

    PIDS = {pids!r}

    def record(what):
        with open(PIDS, "a") as fh:
            fh.write(f"{{what}} {{os.getpid()}}\\n")

    def test_in_the_parent():
        record("parent")

    @pytest.mark.standalone
    @pytest.mark.parametrize("x", ["a", "b"])
    def test_param(x):
        record(x)

    @pytest.mark.standalone
    def test_fails():
        value = 2
        print("about to compare")
        assert value == 3, "value is off"

    @pytest.mark.standalone
    def test_skips():
        pytest.skip("no GPU here")

    @pytest.mark.standalone
    @pytest.mark.xfail(reason="known bug", strict=True)
    def test_xfails():
        raise ValueError("expected")
"""


@pytest.mark.timeout(300)
def test_standalone_runs_each_parametrization_alone_and_reports_its_outcome(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    write(pytester, "test_outcomes", OUTCOMES.format(pids=str(pids)))
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=280)
    result.assert_outcomes(passed=3, failed=1, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "*__ test_fails __*",
            '>       assert value == 3, "value is off"',
            "E       AssertionError: value is off",
            "E       assert 2 == 3",
            "test_outcomes.py:*: AssertionError",
            "*- Captured stdout call -*",
            "about to compare",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] test_outcomes.py:*: no GPU here",
            "XFAIL test_outcomes.py::test_xfails - known bug",
            "FAILED test_outcomes.py::test_fails - AssertionError: value is off*",
        ]
    )
    ran = dict(line.split() for line in pids.read_text().splitlines())
    assert sorted(ran) == ["a", "b", "parent"]  # each parametrization once, nothing else
    assert len(set(ran.values())) == 3  # each in an interpreter of its own


DDP = """
    import os, time
    import pytest
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    import ddpkit
    from ddpkit import DDPPlugin, Trainer

    RECORD = {record!r}

    class Tiny(ddpkit.Module):
        def __init__(self, hang=False):
            super().__init__()
            self.net = nn.Linear(2, 1)
            self.hang = hang

        def training_step(self, batch, batch_idx):
            if self.hang:
                rank = os.environ.get("LOCAL_RANK", "0")
                with open(RECORD, "a") as fh:
                    fh.write(f"hang {{rank}} {{os.getpid()}}\\n")
                print(f"rank {{rank}} is about to hang", flush=True)
                time.sleep(600)
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def fit(model, tmp_path):
        data = TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
        trainer = Trainer(
            num_processes=2, plugins=[DDPPlugin()], max_steps=3, default_root_dir=tmp_path,
            enable_progress_bar=False, enable_checkpointing=False, logger=False,
        )
        trainer.fit(model, DataLoader(data, batch_size=4))
        return trainer
"""

DDP_FIT = """
    def test_other():
        with open(RECORD, "a") as fh:
            fh.write(f"other {{os.getpid()}}\\n")

    @pytest.mark.standalone
    def test_fit(tmp_path):
        trainer = fit(Tiny(), tmp_path)
        assert trainer.world_size == 2
        with open(RECORD, "a") as fh:
            fh.write(f"{{trainer.global_rank}} {{os.environ['PYTEST_CURRENT_TEST']}} {{os.getpid()}}\\n")

    @pytest.mark.standalone
    def test_fit_in_a_cleared_environment(tmp_path):
        from unittest import mock

        with mock.patch.dict(os.environ, {{"CUDA_VISIBLE_DEVICES": ""}}, clear=True):
            fit(Tiny(), tmp_path)
"""


@pytest.mark.timeout(240)
def test_a_trainer_with_ddpplugin_runs_in_a_standalone_test(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    write(pytester, "test_ddp", (DDP + DDP_FIT).format(record=str(record)))
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=220)
    result.assert_outcomes(passed=2, failed=1)
    # A marked test that cleared os.environ is told so (it was told to add the mark it has).
    result.stdout.fnmatch_lines(
        [
            "E *LaunchError: DDPPlugin starts the other ranks by re-running this process's "
            "command line (python -m*pytest *), and this @pytest.mark.standalone test removed the "
            "variables that make each rank run it as that test's rank (DDPKIT_STANDALONE_CHILD "
            "and the rank variables) from os.environ (mock.patch.dict(os.environ, {...}, "
            "clear=True)?). Fix: patch without clear=True, or start from a copy: *"
        ]
    )
    lines = sorted(record.read_text().splitlines())
    assert len(lines) == 3, lines
    rank0, rank1, other = (line.split() for line in lines)
    # Each rank ran the one test id it was started for, in a process of its own; the other
    # test ran once, in the parent.
    assert rank0[:3] == ["0", "test_ddp.py::test_fit", "(call)"]
    assert rank1[:3] == ["1", "test_ddp.py::test_fit", "(call)"]
    assert len({rank0[3], rank1[3], other[1]}) == 3


TRAP = """
    def test_fit_without_the_marker(tmp_path):
        with open(RECORD, "a") as fh:
            fh.write(f"ran {{os.getpid()}}\\n")
        fit(Tiny(), tmp_path)
"""


@pytest.mark.timeout(240)
def test_a_ddpplugin_test_under_a_plain_session_fails_before_any_rank_starts(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    write(pytester, "test_trap", (DDP + TRAP).format(record=str(record)))
    # Plain pytest, ddpkit's plugin not loaded: rank 1 would re-run the whole session.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=220)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E *LaunchError: DDPPlugin starts the other ranks by re-running this process's "
            "command line, and this process is a pytest session (python -m*pytest *): every "
            "other rank would run the whole session again. Fix: load ddpkit's pytest plugin (-p "
            "ddpkit.testing.pytest_plugin) and mark the test @pytest.mark.standalone: each rank "
            "then re-runs that one test."
        ]
    )
    # The plugin loaded, the marker missing: the fix is the marker.
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=220)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E * Fix: mark the test @pytest.mark.standalone: ddpkit's *"])
    assert len(record.read_text().splitlines()) == 2  # once per session: no rank re-ran it


HANGS = """
    if "RANK" in os.environ:  # a rank of the distributed test
        with open(RECORD, "a") as fh:
            fh.write(f"dist {{os.environ['RANK']}} {{os.getpid()}}\\n")
        if os.environ["RANK"] == "1":
            print("rank 1 is stuck importing", flush=True)
            time.sleep(600)

    @pytest.mark.standalone(timeout=15)
    def test_hangs(tmp_path):
        fit(Tiny(hang=True), tmp_path)

    @pytest.mark.distributed(world_size=2, timeout=10)
    def test_never_arrives(dist):
        pass
"""


# The timeouts are what this test waits out: 15 s lets both ranks of the standalone fit reach
# training_step (the second is a fresh interpreter) on a loaded 2-core machine; 10 s lets rank 0
# of the distributed test arrive.
@pytest.mark.timeout(300)
def test_a_hanging_test_is_ended_at_its_timeout_with_every_ranks_last_lines(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"  # the run's TMPDIR
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    record = tmp_path / "record"
    write(pytester, "test_hangs", (DDP + HANGS).format(record=str(record)))
    # Under pytest-xdist: the two tests run at the same time, on free ports of their own.
    result = pytester.runpytest_subprocess(*PLUGIN, "-n", "2", timeout=280)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "standalone test timed out after 15 s; ddpkit ended its process tree" in out
    for rank in (0, 1):
        assert f"rank {rank} is about to hang" in out
        assert f"--- rank {rank} (pid " in out
    assert "Current thread" in out and "in training_step" in out
    assert (
        "distributed test timed out after 10 s (world_size=2, backend=gloo); ddpkit ended every "
        "rank. Root cause: rank 1.\nRank 1 never arrived: it did not reach init_process_group"
    ) in out
    assert "rank 1 is stuck importing" in out
    recorded = record.read_text().splitlines()
    assert sorted(line.rsplit(" ", 1)[0] for line in recorded) == [
        "dist 0", "dist 1", "hang 0", "hang 1"
    ]  # fmt: skip
    leftover = [pid for pid in pids_in(record) if procs.is_running(pid)]
    assert leftover == []
    # Both ranks hang outside any collective: the lowest is named, as for a distributed test.
    assert "ddpkit ended its process tree (pids " in out and "). Root cause: rank 0." in out
    # The timeout ended the tree, the hanging test's launcher too (it could not remove its
    # scratch directory): the parent removed it once no process of the test was left.
    assert [p.name for p in temp.iterdir() if p.name.startswith(PREFIX)] == []


# -- distributed --------------------------------------------------------------------------------

DISTRIBUTED = """
    import os
    import pytest
    import torch
    import torch.distributed

    @pytest.mark.distributed(world_size=2)
    def test_all_reduce(dist):
        assert torch.distributed.is_initialized()
        assert (torch.distributed.get_rank(), torch.distributed.get_world_size()) == (
            dist.rank, dist.world_size
        )
        assert dist.device == torch.device("cpu") and dist.backend == "gloo"
        total = torch.tensor([float(dist.rank + 1)])
        torch.distributed.all_reduce(total)
        assert total.item() == 3.0
        with open({ranks!r}, "a") as fh:
            fh.write(f"{{dist.rank}} {{dist.world_size}} {{os.getpid()}}\\n")

    @pytest.mark.distributed(world_size=2)
    def test_rank_raises(dist):
        if dist.rank == 1:
            raise ValueError(f"rank {{dist.rank}} cannot go on")
"""


def docs_example() -> str:
    """The distributed example of docs/testing.md, as a user would paste it."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    (example,) = [b for b in blocks if "@pytest.mark.distributed" in b]
    return example


@pytest.mark.timeout(300)
def test_distributed_runs_on_every_rank_and_reports_the_failing_one(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    ranks = tmp_path / "ranks"
    write(pytester, "test_dist", DISTRIBUTED.format(ranks=str(ranks)))
    pytester.makepyfile(test_docs_example=docs_example())
    result = pytester.runpytest_subprocess(*PLUGIN, "-n", "2", timeout=280)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["PASSED test_docs_example.py::test_all_reduce_sums"])
    assert sorted(line.rsplit(" ", 1)[0] for line in ranks.read_text().splitlines()) == [
        "0 2", "1 2"
    ]  # fmt: skip
    result.stdout.fnmatch_lines(
        [
            "distributed test failed on 1 of 2 ranks (world_size=2, backend=gloo); root cause: "
            "rank 1.",
            "--- rank 1 (pid *): failed in call (root cause) ---",
            '*raise ValueError(f"rank {dist.rank} cannot go on")',
            "E * ValueError: rank 1 cannot go on",
            "test_dist.py:*: ValueError",
            "--- rank 0 (pid *): passed ---",
        ]
    )
