"""Restarts (``max_restarts``): the time from a fault to the first training step after it.

    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.reliability --suite restart --runs 3

Each run is ``tests/integration/fault_scripts/restart_run.py`` (two CPU ranks, gloo, a dropout
network, 3 epochs of 4 steps, a checkpoint at each epoch's end), through the fault tests'
harness: rank 1 SIGKILLs itself at batch 2 of epoch 1, with its timestamp; rank 0 prints one with
each training step. The clock starts at the fault and stops at rank 0's first step after it (the
new job started, resumed and trained), at the restart line rank 0 prints, and when no process of
the run is left. Each run's final weights are compared with an uninterrupted run's (same seed).
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))

from fault_scripts.harness import FaultRun  # noqa: E402
from fault_scripts.restarts import restart_run, weights  # noqa: E402

__all__ = ["CASES", "RestartCase", "restart_table"]

_STEP = re.compile(r"ddpkit-fault: step \d+ \d+ at (?P<t>[0-9.]+)")
TORCHRUN = (
    sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
    "--max-restarts=1", "--no-python",
)  # fmt: skip


@dataclass(frozen=True)
class RestartCase:
    label: str
    launcher: str
    flags: tuple[str, ...] = ()
    #: "ddpkit" or "lightning" (the script's --lightning)
    family: str = "ddpkit"


CASES = [
    RestartCase("ModelCheckpoint", "subprocess", ("--max-restarts", "1")),
    RestartCase("ModelCheckpoint", "spawn", ("--max-restarts", "1")),
    RestartCase("ddpkit's own", "subprocess", ("--max-restarts", "1", "--no-checkpoint")),
    RestartCase("ModelCheckpoint", "torchrun", ()),
    RestartCase("Lightning", "subprocess", ("--max-restarts", "1", "--lightning"), "lightning"),
    RestartCase("Lightning", "spawn", ("--max-restarts", "1", "--lightning"), "lightning"),
]


def _first_step_after(run: FaultRun) -> float | None:
    """To rank 0's first step of the restarted job: after the restart line rank 0 prints as the
    new job resumes (rank 0 of the failed job may still finish a step after the fault)."""
    if run.fault_at is None:
        return None
    restarted = [t for t, line in run.stamps if line.startswith("ddpkit: restart ")]
    since = restarted[0] if restarted else run.fault_at
    steps = [float(m["t"]) for m in _STEP.finditer(run.stderr)]
    later = [t for t in steps if t > since]
    return min(later) - run.fault_at if later else None


def _line_after(run: FaultRun) -> float | None:
    if run.fault_at is None:
        return None
    lines = [t for t, line in run.stamps if line.startswith("ddpkit: restart ")]
    return lines[0] - run.fault_at if lines else None


def _reference(family: str) -> dict[str, torch.Tensor]:
    flags = ("--lightning",) if family == "lightning" else ()
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        run, out = restart_run("subprocess", Path(tmp), *flags, fault="none")
        if run.returncode != 0:
            raise SystemExit(f"the uninterrupted {family} run failed:\n{run.stderr}")
        return weights(out)


def _measure(case: RestartCase, runs: int, reference: dict[str, torch.Tensor]) -> list[str]:
    steps: list[float] = []
    lines: list[float] = []
    ends: list[float] = []
    equal = 0
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
            wrap = TORCHRUN if case.launcher == "torchrun" else ()
            run, out = restart_run(
                case.launcher, Path(tmp), *case.flags, wrap=wrap, private_tmp=not wrap
            )
            if run.returncode == 0 and out.exists():
                got = weights(out)
                equal += all(torch.equal(got[k], v) for k, v in reference.items())
        step = _first_step_after(run)
        for found, into in ((step, steps), (_line_after(run), lines)):
            if found is not None:
                into.append(found)
        if run.seconds_to_end is not None:
            ends.append(run.seconds_to_end)
        shown = "—" if step is None else f"{step:5.2f} s"
        status = run.returncode
        sys.stderr.write(f"{case.launcher:10} {case.label:16} step {shown} status {status}\n")
    return [_spread(steps), _spread(lines), _spread(ends), f"{equal} of {runs}"]


def _spread(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def restart_table(runs: int, only: str = "") -> str:
    """The table for docs/reliability.md (min / median / max of ``runs`` each)."""
    references: dict[str, dict[str, torch.Tensor]] = {}
    lines = [
        "| checkpoint | launcher | fault → first step after it, s | fault → restart line, s "
        "| fault → end of the run, s | final weights equal an uninterrupted run's |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for case in CASES:
        if only and not re.search(only, f"{case.launcher}/{case.label}"):
            continue
        if case.family not in references:
            references[case.family] = _reference(case.family)
        cells = _measure(case, runs, references[case.family])
        lines.append(f"| {case.label} | {case.launcher} | {' | '.join(cells)} |")
    lines.append("")
    lines.append(f"min / median / max of {runs} run(s) each.")
    return "\n".join(lines)
