"""``python -m bench`` runs end to end and writes its report; the report is built from raw runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import report

REPO = Path(__file__).resolve().parents[2]


def test_quick_run_writes_results(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_")}
    command = [
        sys.executable,
        "-m",
        "bench",
        "--quick",
        "--only",
        "^tiny/(raw|ddpkit)/single$",
        "--no-lightning",
        "--no-imports",
        "--no-plot",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stdout + done.stderr
    raw = json.loads((tmp_path / "results.json").read_text())
    assert sorted(r["config"] for r in raw["runs"]) == ["tiny/ddpkit/single", "tiny/raw/single"]
    losses = {r["final_loss"] for r in raw["runs"]}
    assert len(losses) == 1, f"the contenders trained differently: {losses}"
    text = (tmp_path / "RESULTS.md").read_text()
    assert "| tiny model, 1 process, steady step |" in text
    assert "`tiny/ddpkit/single / raw`" in text


def _run(config: str, repeat: int, step_s: float, first_step: float) -> dict[str, Any]:
    workload, _, mode = config.split("/")
    world = 1 if mode == "single" else 2
    return {
        "config": config,
        "repeat": repeat,
        "workload": {"name": workload, "batch": 32, "warmup": 1, "steps": 5},
        "world_size": world,
        "wall_s": 5.0,
        "t0": 100.0,
        "first_step_wall": 100.0 + first_step,
        "step_dt": [9.0, step_s, step_s, step_s],  # the first is warm-up
        "final_loss": 0.5,
        "import_s": 2.0,
    }


def _raw_results() -> dict[str, Any]:
    runs = []
    for r in range(3):
        runs += [
            _run("tiny/raw/single", r, 0.001, 4.0),
            _run("tiny/ddpkit/single", r, 0.00105, 4.1),
            _run("tiny/lightning/single", r, 0.0025, 5.0),
            _run("mlp/raw/ddp", r, 0.003, 4.0),
            _run("mlp/ddpkit/ddp", r, 0.0036, 4.5),
        ]
    imports = [
        {"module": m, "repeat": r, "seconds": s}
        for r in range(3)
        for m, s in (("torch", 2.0), ("ddpkit", 2.1), ("lightning", 4.0))
    ]
    return {"runs": runs, "imports": imports, "warmup": {}}


def test_figures_and_paired_ratios() -> None:
    s = report.summarize(_raw_results())
    step = s.spread("tiny/ddpkit/single", "step_ms")
    assert step is not None
    assert step.mid == pytest.approx(1.05)  # the warm-up step is left out
    ratio = s.paired("tiny/ddpkit/single", "tiny/raw/single", "step_ms", lambda a, b: a / b)
    assert ratio is not None
    assert ratio.mid == pytest.approx(1.05)
    samples = s.spread("mlp/ddpkit/ddp", "samples_s")
    assert samples is not None
    assert samples.mid == pytest.approx(2 * 32 / 0.0036)


def test_markdown_marks_each_target() -> None:
    s = report.summarize(_raw_results())
    meta = {
        "date": "today",
        "seconds": 60.0,
        "cores": 2,
        "python": "3",
        "torch": "2",
        "lightning": "2.6",
        "ddpkit": "0",
        "repeats": 3,
        "quick": False,
    }
    lines = report.markdown(s, meta, None).splitlines()
    row = {line.split("|")[1].strip(): line for line in lines if line.startswith("| ")}
    assert row["tiny model, 1 process, steady step"].split("|")[7].strip() == "yes"  # 1.05 × raw
    assert row["MLP, 2-process subprocess DDP, steady step"].split("|")[7].strip() == "no"  # 1.2 ×
    assert row["subprocess DDP, process start → first step"].split("|")[7].strip() == "no"  # +0.5
    assert "1.05 ×" in row["`from ddpkit import Module, Trainer` (whole process)"]
    # A missed target is named under the table, with its figure.
    missed = "- **MLP, 2-process subprocess DDP, steady step**: 1.200 ×"
    assert any(line.startswith(missed) for line in lines)


def test_plot_is_optional(tmp_path: Path) -> None:
    s = report.summarize(_raw_results())
    drawn = report.plot(s, tmp_path / "ratios.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert drawn is False
    else:
        assert drawn is True
        assert (tmp_path / "ratios.png").stat().st_size > 0
