"""Run :mod:`restart_run` through the fault harness, and compare the weights it ends with."""

from __future__ import annotations

import csv
from pathlib import Path

import torch

from fault_scripts.harness import FaultRun, run_fault

__all__ = [
    "SCRIPT",
    "assert_equal_weights",
    "logged_rows",
    "restart_lines",
    "restart_run",
    "resumed_at",
    "weights",
]

SCRIPT = Path(__file__).with_name("restart_run.py")
#: far above any run's time: only a hang guard
HANG_GUARD = 120.0


def restart_run(
    launcher: str,
    tmp_path: Path,
    *flags: str,
    fault: str = "kill",
    wrap: tuple[str, ...] = (),
    python: bool = True,
    private_tmp: bool = True,
) -> tuple[FaultRun, Path]:
    """One run in ``tmp_path`` (its --root is ``tmp_path/run``); the run ended by itself, no
    process of it is left and (``private_tmp``) nothing is left in its own TMPDIR."""
    out = tmp_path / "weights.pt"
    private = tmp_path / "tmp"
    private.mkdir(exist_ok=True)
    extra = ("--root", str(tmp_path / "run"), "--out", str(out), *flags)
    run = run_fault(
        launcher,
        fault,
        timeout=HANG_GUARD,
        tmpdir=private if private_tmp else None,
        extra=extra,
        wrap=wrap,
        python=python,
        script=SCRIPT,
    )
    assert not run.timed_out, f"still running after {HANG_GUARD} s:\n{run.stderr}"
    assert run.survivors == [], f"processes left running: {run.survivors}\n{run.stderr}"
    assert run.litter == [], f"left in TMPDIR: {run.litter}"
    return run, out


def weights(path: Path) -> dict[str, torch.Tensor]:
    loaded: dict[str, torch.Tensor] = torch.load(path, weights_only=True)
    return loaded


def assert_equal_weights(mine: Path, reference: dict[str, torch.Tensor]) -> None:
    got = weights(mine)
    assert got.keys() == reference.keys()
    for name, value in reference.items():
        assert torch.equal(got[name], value), f"{name} differs from the uninterrupted run's"


def restart_lines(run: FaultRun) -> list[str]:
    """The lines rank 0 of a restarted fit printed."""
    return [line for line in run.stderr.splitlines() if line.startswith("ddpkit: restart ")]


def resumed_at(run: FaultRun) -> tuple[int, int]:
    """(epoch, batch) of rank 0's first training step after the restart: where the restarted
    ranks began."""
    lines = run.stderr.splitlines()
    # after the restart line (rank 0 of the restarted attempt, before its first step): rank 0
    # of the failed attempt may print its next step after the kill, before it is ended
    restart = next(i for i, line in enumerate(lines) if line.startswith("ddpkit: restart "))
    for line in lines[restart:]:
        if line.startswith("ddpkit-fault: step "):
            epoch, batch = line.split()[2:4]
            return int(epoch), int(batch)
    raise AssertionError(f"no training step after the fault:\n{run.stderr}")


def logged_rows(path: Path) -> list[tuple[int, int, int]]:
    """(epoch, step, batch) of each row of ``restart_run.py --csv``'s metrics.csv, in order."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [(int(r["epoch"]), int(r["step"]), int(float(r["batch"]))) for r in rows]
