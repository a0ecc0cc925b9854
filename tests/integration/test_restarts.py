"""Restarts: a fit whose rank is SIGKILLed mid-epoch starts again on new ranks and ends with the
weights of an uninterrupted run — dropout included (each rank's RNG states are in the
checkpoint) — under ddpkit's two launchers, under torchrun ``--max-restarts``, and on Lightning's
loop; restarts used up name every attempt's root cause.

Each case is one real 2-rank run of ``fault_scripts/restart_run.py`` (a dropout network, 3
epochs, a checkpoint at each epoch's end; rank 1 kills itself at batch 2 of epoch 1), driven by
the fault harness, which also checks that no process of the run is left.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from fault_scripts.restarts import (
    assert_equal_weights,
    logged_rows,
    restart_lines,
    restart_run,
    resumed_at,
    weights,
)

TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2")

pytestmark = pytest.mark.timeout(200)


@pytest.fixture(scope="module")
def lightning_reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    pytest.importorskip("pytorch_lightning")
    path = tmp_path_factory.mktemp("lightning-reference")
    run, out = restart_run("subprocess", path, "--lightning", fault="none")
    assert run.returncode == 0, run.stderr
    return weights(out)


@pytest.mark.xdist_group("restart-reference")
@pytest.mark.parametrize(
    ("launcher", "flags", "resumes_from"),
    [
        # the default ModelCheckpoint's file of epoch 0
        pytest.param("subprocess", (), r"/run/checkpoints/epoch=0-step=4\.ckpt", id="subprocess"),
        # no ModelCheckpoint: ddpkit's own, in the launcher's run folder (gone afterwards)
        pytest.param("spawn", ("--no-checkpoint",), r"/ddpkit-\w+/restart\.ckpt", id="spawn-own"),
        # a checkpoint within epoch 1 (after its 2nd batch): the restart goes on at batch 2
        pytest.param(
            "subprocess",
            ("--every-n-train-steps", "2"),
            r"/run/checkpoints/epoch=1-step=6\.ckpt",
            id="subprocess-mid-epoch",
        ),
        # rank 0's collective fails first and the supervisor's abort lands in its teardown: the
        # restart still starts clean (the first attempt's process group is gone)
        pytest.param(
            "subprocess",
            ("--slow-teardown",),
            r"/run/checkpoints/epoch=0-step=4\.ckpt",
            id="subprocess-abort-in-teardown",
        ),
        # rank 0 saves alone at the failure (save_on_exception: epoch=1-step=6.ckpt, and
        # last.ckpt): mid-step and without rank 1's RNG, never resumed from. Whether rank 0's
        # save comes before the supervisor stops it is a race: when it does not, last.ckpt still
        # holds epoch 0's end (save_last, written after epoch=0-step=4.ckpt) and is the newest
        # whole file; either way the restart resumes at global step 4, never at the lone step 6
        pytest.param(
            "subprocess",
            ("--save-on-exception",),
            r"/run/checkpoints/(epoch=0-step=4|last)\.ckpt",
            id="subprocess-save-on-exception",
        ),
    ],
)
def test_a_killed_rank_restarts_and_ends_as_an_uninterrupted_run(
    launcher: str,
    flags: tuple[str, ...],
    resumes_from: str,
    tmp_path: Path,
    reference: dict[str, torch.Tensor],
) -> None:
    run, out = restart_run(launcher, tmp_path, "--max-restarts", "1", "--csv", *flags)
    assert run.returncode == 0, run.stderr
    (line,) = restart_lines(run)
    killed = re.search(r"ddpkit-fault: fault kill rank 1 at", run.stderr)
    assert killed is not None
    step = 6 if "step=6" in resumes_from else 4
    assert re.fullmatch(
        rf"ddpkit: restart 1 of 1 after rank 1 \(pid \d+\): killed by signal SIGKILL .*: fit "
        rf"resumes from .*{resumes_from} \(epoch 1, global step {step}\)",
        line,
    ), line
    # The restarted ranks began where the checkpoint stood (a retrain from scratch would end on
    # the same weights: these say it resumed), 4 batches an epoch.
    assert resumed_at(run) == (1, step - 4)
    assert_equal_weights(out, reference)
    # Nothing logged is lost: the first attempt's rows (up to the fault, in epoch 1's batch 2),
    # then the restarted attempt's from where it resumed, in one metrics.csv.
    first = [(s // 4, s, s % 4) for s in range(6)]
    assert logged_rows(tmp_path / "run" / "metrics.csv") == first + [
        (s // 4, s, s % 4) for s in range(step, 12)
    ]


@pytest.mark.xdist_group("restart-reference")
def test_torchrun_max_restarts_resumes_the_same_way(
    tmp_path: Path, reference: dict[str, torch.Tensor]
) -> None:
    """torchrun restarts every worker with TORCHELASTIC_RESTART_COUNT=1; ddpkit's Trainer (no
    max_restarts of its own) resumes from the newest checkpoint written since torchrun started."""
    wrap = (*TORCHRUN, "--max-restarts=1", "--no-python")
    # torchrun keeps its own logs in TMPDIR: not ddpkit's litter
    run, out = restart_run("torchrun", tmp_path, wrap=wrap, private_tmp=False)
    assert run.returncode == 0, run.stderr
    (line,) = restart_lines(run)
    assert re.fullmatch(
        r"ddpkit: restart 1 of 1: fit resumes from .*/run/checkpoints/epoch=0-step=4\.ckpt "
        r"\(epoch 1, global step 4\)",
        line,
    ), line
    assert_equal_weights(out, reference)


@pytest.mark.xdist_group("restart-reference")
def test_ddpkit_run_max_restarts_resumes_the_same_way(
    tmp_path: Path, reference: dict[str, torch.Tensor]
) -> None:
    """``ddpkit run --max-restarts`` starts the job again with TORCHELASTIC_RESTART_COUNT=1, as
    torchrun does: ddpkit's Trainer resumes from the newest checkpoint of this run."""
    wrap = (sys.executable, "-m", "ddpkit", "run", "--nproc-per-node", "2", "--max-restarts", "1")
    run, out = restart_run("torchrun", tmp_path, wrap=wrap, python=False)
    assert run.returncode == 0, run.stderr
    # ddpkit run's own restart, as tests/integration/test_ddpkit_run.py's raw script shows it:
    # attempt 0's root cause reported, the job started again with the next restart count.
    output = run.stderr + run.stdout
    assert "ddpkit run failed: rank 1 (pid " in output
    assert (
        "restarting the job (1 restart(s) left): attempt 1 gets TORCHELASTIC_RESTART_COUNT=1"
    ) in output
    (line,) = restart_lines(run)
    assert re.fullmatch(
        r"ddpkit: restart 1 of 1: fit resumes from .*/run/checkpoints/epoch=0-step=4\.ckpt "
        r"\(epoch 1, global step 4\)",
        line,
    ), line
    assert_equal_weights(out, reference)


@pytest.mark.parametrize("launcher", ["subprocess", "spawn"])
def test_restarts_used_up_fail_the_job_naming_every_attempts_root_cause(
    launcher: str, tmp_path: Path
) -> None:
    run, _ = restart_run(launcher, tmp_path, "--max-restarts", "1", "--kill-attempts", "2", "--csv")
    assert run.returncode == 1
    # every row the ranks logged, both attempts' (each up to its fault), stays in metrics.csv
    attempt = [(s // 4, s, s % 4) for s in range(6)]
    assert logged_rows(tmp_path / "run" / "metrics.csv") == attempt + attempt[4:]
    text = run.stderr.replace("[rank0]: ", "")
    assert f"ChildFailedError: DDP ({launcher} launcher) failed: rank 1 (pid" in text
    found = re.search(
        r"ddpkit: max_restarts=1 used up; the root cause of each attempt:\n"
        r"  attempt 0: rank 1 \(pid (\d+)\): killed by signal SIGKILL .*\n"
        r"  attempt 1: rank 1 \(pid (\d+)\): killed by signal SIGKILL ",
        text,
    )
    assert found is not None, text
    assert found[1] != found[2]  # a new rank 1 each time
    assert len(restart_lines(run)) == 1


@pytest.mark.xdist_group("lightning-restart-reference")
@pytest.mark.parametrize(
    ("launcher", "flags"),
    [
        pytest.param("subprocess", (), id="subprocess"),
        pytest.param("spawn", ("--no-checkpoint",), id="spawn-own"),
        # Lightning's own save_on_exception: rank 0's lone save at the failure is passed over
        pytest.param("subprocess", ("--save-on-exception",), id="subprocess-save-on-exception"),
    ],
)
def test_a_lightning_fit_restarts_and_ends_as_an_uninterrupted_run(
    launcher: str,
    flags: tuple[str, ...],
    tmp_path: Path,
    lightning_reference: dict[str, torch.Tensor],
) -> None:
    run, out = restart_run(launcher, tmp_path, "--lightning", "--max-restarts", "1", *flags)
    assert run.returncode == 0, run.stderr
    (line,) = restart_lines(run)
    assert line.startswith("ddpkit: restart 1 of 1 after rank 1 (pid "), line
    assert "fit resumes from " in line, line
    assert_equal_weights(out, lightning_reference)
