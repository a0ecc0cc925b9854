"""The fault cases of docs/reliability.md, on a Lightning module trained by Lightning 2.x with
ddpkit's supervision, the default of ``ddpkit.lightning.Trainer`` with 1.x device flags.

Each case is a real run of ``scripts/lit_faulty.py`` (two CPU ranks, gloo) in a session of its
own, through the fault-injection harness of tests/integration: it waits until no process of the
session is left and reports the survivors. The times are measured by ``bench/reliability.py
--suite lightning``; the harness timeout here is only a hang guard.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
from pathlib import Path

import pytest

pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from fault_scripts.harness import FaultRun, run_fault

SCRIPT = Path(__file__).parent / "scripts" / "lit_faulty.py"
WHAT = {"subprocess": "DDP (subprocess launcher)", "spawn": "DDP (spawn launcher)"}
HANG_GUARD = 90.0

pytestmark = pytest.mark.timeout(200)


def run(launcher: str, fault: str, tmp_path: Path, **kwargs: object) -> FaultRun:
    private = tmp_path / "tmp"
    private.mkdir()
    return run_fault(
        launcher,
        fault,
        script=SCRIPT,
        timeout=HANG_GUARD,
        tmpdir=private,
        **kwargs,  # type: ignore[arg-type]
    )


def assert_clean(run: FaultRun) -> None:
    assert not run.timed_out, f"the job was still running after {HANG_GUARD} s:\n{run.stderr}"
    assert run.survivors == [], f"processes left running: {run.survivors}\n{run.stderr}"
    assert run.litter == [], f"left in TMPDIR: {run.litter}"


def report_of(run: FaultRun) -> str:
    text = run.stderr.replace("[rank0]: ", "")
    return text[text.index("ChildFailedError: ") :]


@pytest.mark.parametrize(
    ("launcher", "spelling"),
    # legacy: ddpkit.lightning.Trainer(num_processes=2, plugins=[...]) (supervised by default);
    # modern: pytorch_lightning.Trainer(accelerator="cpu", devices=2,
    #                                   strategy=SupervisedDDPStrategy(start_method=...))
    [("subprocess", "legacy"), ("spawn", "modern")],
)
def test_a_rank_that_raises_ends_the_lightning_job_with_its_traceback(
    launcher: str, spelling: str, tmp_path: Path
) -> None:
    result = run(launcher, "raise", tmp_path, rank=1, extra=("--spelling", spelling))
    assert_clean(result)
    assert result.returncode == 1
    report = report_of(result)
    assert report.startswith(
        f"ChildFailedError: {WHAT[launcher]} failed: rank 1 (pid {result.ranks[1]}) is the root "
        f"cause, raised RuntimeError: injected fault on rank 1"
    )
    # The user's line second (root cause first), then rank 1's traceback once, through the
    # Lightning module's own frame, then the other rank in one line.
    assert re.search(r"lit_faulty\.py:\d+, in inject", report.splitlines()[1])
    training_step_at = report.index("in training_step")
    assert report.count("Traceback (most recent call last)") == 1
    assert training_step_at < report.index(f"rank 0 (pid {result.ranks[0]}): ")


@pytest.mark.full_suite(
    "a killed rank is found by the supervisor's wait on its exit status, whatever loop the rank "
    "runs: tests/integration/test_faults.py kills a rank under both launchers, and the raising "
    "rank above shows both supervised launchers under Lightning's loop"
)
@pytest.mark.parametrize("launcher", ["subprocess", "spawn"])
def test_a_sigkilled_rank_ends_the_lightning_job(launcher: str, tmp_path: Path) -> None:
    result = run(launcher, "kill", tmp_path, rank=1)
    assert_clean(result)
    assert result.returncode == 1
    assert report_of(result).startswith(
        f"ChildFailedError: {WHAT[launcher]} failed: rank 1 (pid {result.ranks[1]}) is the root "
        f"cause, killed by signal SIGKILL"
    )


def test_rank_zero_raising_ends_the_children_at_once(tmp_path: Path) -> None:
    result = run("subprocess", "raise", tmp_path, rank=0)
    assert_clean(result)
    assert result.returncode == 1
    assert "RuntimeError: injected fault on rank 0" in result.stderr
    # Lightning's own SIGTERM handler does not hold the child up: SIGTERM ends it.
    assert (
        f"ddpkit: rank 1 (pid {result.ranks[1]}): ended by ddpkit (SIGTERM) after rank 0 failed"
    ) in result.stderr


@pytest.mark.parametrize(
    "launcher",
    [
        "subprocess",
        pytest.param(
            "spawn",
            marks=pytest.mark.full_suite(
                "the subprocess run shows the watchdog watching Lightning's loop, and "
                "tests/integration/test_faults.py's stalled rank [spawn-1] the spawn launcher "
                "installing it in its ranks"
            ),
        ),
    ],
)
def test_a_stalled_rank_is_named_with_its_stack(launcher: str, tmp_path: Path) -> None:
    result = run(launcher, "stall", tmp_path, rank=1, stall_timeout=3.0)
    assert_clean(result)
    assert result.returncode == 1
    report = report_of(result)
    assert report.startswith(
        f"ChildFailedError: {WHAT[launcher]} failed: rank 1 (pid {result.ranks[1]}) is the root "
        f"cause, never arrived at backward"
    )
    assert "in inject" in report and "in training_step" in report  # where it was stuck
    assert "waited 3" in result.stderr and "for rank(s) 1, which never arrived" in result.stderr


def test_a_busy_master_port_fails_before_any_rank_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "MASTER_PORT": str(port)}
        result = run("subprocess", "ok", tmp_path, env=env)
    assert_clean(result)
    assert result.returncode == 1
    assert result.ranks == {}  # no rank was started, so none can be orphaned
    assert f"LaunchError: MASTER_PORT={port}: the rendezvous store cannot listen on " in (
        result.stderr
    )


def test_the_children_end_with_the_killed_parent(tmp_path: Path) -> None:
    result = run("subprocess", "none", tmp_path, rank=1, signal_parent=signal.SIGKILL)
    assert result.returncode == -signal.SIGKILL
    assert not result.timed_out and result.survivors == [], result.stderr
    assert set(result.ranks) == {0, 1}


def test_sigterm_to_the_parent_ends_every_spawned_rank(tmp_path: Path) -> None:
    result = run("spawn", "none", tmp_path, rank=1, signal_parent=signal.SIGTERM)
    assert_clean(result)
    assert result.returncode == 143
    assert "ddpkit: SIGTERM: every rank of DDP (spawn launcher) ended:" in result.stderr
