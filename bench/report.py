"""From raw runs to figures, paired ratios, ``RESULTS.md`` and the ratio plot."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["machine_meta", "markdown", "plot", "run_figures", "summarize"]

FIGURES = ("wall_s", "launch_s", "step_ms", "samples_s", "final_loss", "import_s")


def run_figures(run: dict[str, Any], warmup: int | None = None) -> dict[str, float]:
    """One run's figures: whole-process wall time, process start → first optimizer step, the
    median step time after warm-up, samples per second (all ranks), the final loss."""
    w = run["workload"]
    skip = w["warmup"] if warmup is None else warmup
    dts = run["step_dt"][skip:] or run["step_dt"]
    step = statistics.median(dts) if dts else float("nan")
    return {
        "wall_s": run["wall_s"],
        "launch_s": run["first_step_wall"] - run["t0"],
        "step_ms": step * 1e3,
        "samples_s": w["batch"] * run["world_size"] / step,
        "final_loss": run["final_loss"],
        "import_s": run["import_s"],
    }


@dataclass(frozen=True)
class Spread:
    lo: float
    mid: float
    hi: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(min(values), statistics.median(values), max(values))

    def fmt(self, spec: str = ".3g", unit: str = "") -> str:
        if self.lo == self.hi:
            return f"{self.mid:{spec}}{unit}"
        return f"{self.mid:{spec}}{unit} ({self.lo:{spec}}–{self.hi:{spec}})"


@dataclass
class Summary:
    #: config name -> figure -> value per round
    by_config: dict[str, dict[str, dict[int, float]]]
    #: module -> seconds per round
    imports: dict[str, dict[int, float]]

    def spread(self, config: str, figure: str) -> Spread | None:
        values = self.by_config.get(config, {}).get(figure)
        return Spread.of(list(values.values())) if values else None

    def paired(
        self, a: str, b: str, figure: str, op: Callable[[float, float], float]
    ) -> Spread | None:
        """``op(a, b)`` per round, for the rounds both ran."""
        va = self.by_config.get(a, {}).get(figure, {})
        vb = self.by_config.get(b, {}).get(figure, {})
        pairs = [op(va[r], vb[r]) for r in sorted(va) if r in vb]
        return Spread.of(pairs) if pairs else None

    def import_ratio(self, module: str) -> Spread | None:
        mine, torch = self.imports.get(module, {}), self.imports.get("torch", {})
        pairs = [mine[r] / torch[r] for r in sorted(mine) if r in torch]
        return Spread.of(pairs) if pairs else None


def summarize(raw: dict[str, Any]) -> Summary:
    by_config: dict[str, dict[str, dict[int, float]]] = {}
    warmup = raw.get("warmup", {})
    for run in raw["runs"]:
        figs = run_figures(run, warmup.get(run["workload"]["name"]))
        slot = by_config.setdefault(run["config"], {})
        for name, value in figs.items():
            slot.setdefault(name, {})[run["repeat"]] = value
    imports: dict[str, dict[int, float]] = {}
    for item in raw["imports"]:
        imports.setdefault(item["module"], {})[item["repeat"]] = item["seconds"]
    return Summary(by_config, imports)


def _ratio(a: float, b: float) -> float:
    return a / b


def _diff(a: float, b: float) -> float:
    return a - b


@dataclass(frozen=True)
class Target:
    label: str
    config: str  # with {c} for the contender
    figure: str
    kind: str  # "ratio" (ddpkit / raw ≤ limit) or "diff" (ddpkit − raw ≤ limit, seconds)
    limit: float
    raw: str | None = None  # raw PyTorch's config when it is not config (raw has no callbacks)

    def configs(self) -> tuple[str, str, str]:
        """(raw, ddpkit, lightning) config names."""
        raw = self.raw or self.config.format(c="raw")
        return raw, self.config.format(c="ddpkit"), self.config.format(c="lightning")


TARGETS = (
    Target("tiny model, 1 process, steady step", "tiny/{c}/single", "step_ms", "ratio", 1.10),
    Target("MLP, 1 process, steady step", "mlp/{c}/single", "step_ms", "ratio", 1.05),
    Target("MLP, 2-process subprocess DDP, steady step", "mlp/{c}/ddp", "step_ms", "ratio", 1.10),
    Target("MLP, 2-process spawn DDP, steady step", "mlp/{c}/spawn", "step_ms", "ratio", 1.10),
    Target(
        "tiny model, 1 process, ModelCheckpoint + EarlyStopping + a callback",
        "tiny/{c}/single+cb",
        "step_ms",
        "ratio",
        1.10,
        raw="tiny/raw/single",
    ),
    Target(
        "MLP, 1 process, ModelCheckpoint + EarlyStopping + a callback",
        "mlp/{c}/single+cb",
        "step_ms",
        "ratio",
        1.10,
        raw="mlp/raw/single",
    ),
    Target("subprocess DDP, process start → first step", "mlp/{c}/ddp", "launch_s", "diff", 0.3),
    Target("spawn DDP, process start → first step", "mlp/{c}/spawn", "launch_s", "diff", 0.3),
)

_UNITS = {"step_ms": (".3g", " ms"), "launch_s": (".3g", " s")}

#: The import row: what a user's script imports, against ``import torch``, each a whole
#: ``python -c`` process (``import ddpkit`` alone imports no torch).
IMPORT_LABEL = "`from ddpkit import Module, Trainer` (whole process)"

#: Why a target is missed, where the profile found the cost and it could not be removed:
#: written under the targets table when that row says "no" (label -> reason).
MISSED: dict[str, str] = {}


def _missed_notes(s: Summary) -> list[str]:
    """One line for each target the run missed: its figure, and the reason or that none is
    known."""
    notes = []
    for line in _targets_table(s)[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[6] != "no":
            continue
        reason = MISSED.get(
            cells[0],
            "no reason found yet: the profile shows no cost of ddpkit's "
            "own that explains it (see the ratios' spread)",
        )
        notes.append(f"- **{cells[0]}**: {cells[4]} (target {cells[5]}). {reason}")
    return ["### Targets not met", "", *notes, ""] if notes else []


def _cell(s: Spread | None, spec: str = ".3g", unit: str = "") -> str:
    return "—" if s is None else s.fmt(spec, unit)


def _targets_table(s: Summary) -> list[str]:
    lines = [
        "| figure | raw PyTorch | Lightning | ddpkit | ddpkit vs raw | target | met | "
        "ddpkit / Lightning |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    torch_s = Spread.of(list(s.imports["torch"].values())) if "torch" in s.imports else None
    if torch_s is not None and "ddpkit" in s.imports:
        mine = s.import_ratio("ddpkit")
        pl = s.import_ratio("lightning")
        ddpkit_s = Spread.of(list(s.imports["ddpkit"].values()))
        pl_s = None
        if "lightning" in s.imports:
            pl_s = Spread.of(list(s.imports["lightning"].values()))
        met = mine is not None and mine.mid <= 1.10
        vs_pl = None
        if pl_s is not None:
            dk, lt = s.imports["ddpkit"], s.imports["lightning"]
            vs_pl = Spread.of([dk[r] / lt[r] for r in dk if r in lt])
        lines.append(
            f"| {IMPORT_LABEL} | torch {torch_s.fmt('.3g', ' s')} | "
            f"{_cell(pl_s, '.3g', ' s')} ({_cell(pl, '.2f', ' ×')} torch) | "
            f"{ddpkit_s.fmt('.3g', ' s')} | {_cell(mine, '.2f', ' ×')} | ≤ 1.10 × torch | "
            f"{'yes' if met else 'no'} | {_cell(vs_pl, '.2f', ' ×')} |"
        )
    for t in TARGETS:
        raw, dk, pl = t.configs()
        if s.spread(dk, t.figure) is None:
            continue
        spec, unit = _UNITS[t.figure]
        if t.kind == "ratio":
            vs = s.paired(dk, raw, t.figure, _ratio)
            vs_cell, target = _cell(vs, ".3f", " ×"), f"≤ {t.limit:.2f} × raw"
        else:
            vs = s.paired(dk, raw, t.figure, _diff)
            vs_cell, target = _cell(vs, "+.2f", " s"), f"≤ raw + {t.limit:g} s"
        met = "—" if vs is None else ("yes" if vs.mid <= t.limit else "no")
        lines.append(
            f"| {t.label} | {_cell(s.spread(raw, t.figure), spec, unit)} | "
            f"{_cell(s.spread(pl, t.figure), spec, unit)} | "
            f"{_cell(s.spread(dk, t.figure), spec, unit)} | {vs_cell} | {target} | {met} | "
            f"{_cell(s.paired(dk, pl, t.figure, _ratio), '.2f', ' ×')} |"
        )
    return lines


def _configs_table(s: Summary) -> list[str]:
    lines = [
        "| run | whole process | start → first step | steady step | samples/s | in-process "
        "import | final loss |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in sorted(s.by_config, key=_config_order):
        loss = s.spread(name, "final_loss")
        lines.append(
            f"| `{name}` | {_cell(s.spread(name, 'wall_s'), '.3g', ' s')} | "
            f"{_cell(s.spread(name, 'launch_s'), '.3g', ' s')} | "
            f"{_cell(s.spread(name, 'step_ms'), '.3g', ' ms')} | "
            f"{_cell(s.spread(name, 'samples_s'), '.0f')} | "
            f"{_cell(s.spread(name, 'import_s'), '.3g', ' s')} | "
            f"{'—' if loss is None else f'{loss.mid:.6f}'} |"
        )
    return lines


def _pairs(s: Summary) -> list[tuple[str, str, str]]:
    """(label, numerator, denominator) for every pairing present."""
    out = []
    for name in sorted(s.by_config, key=_config_order):
        workload, contender, mode = name.split("/")
        if contender != "ddpkit":
            continue
        for other in ("raw", "lightning"):
            partner = f"{workload}/{other}/{mode}"
            if other == "raw":
                partner = partner.replace("+on", "").replace("+cb", "")
            if partner in s.by_config:
                out.append((f"{name} / {other}", name, partner))
    return out


def _ratios_table(s: Summary) -> list[str]:
    lines = [
        "| pairing | steady step | whole process | start → first step | Δ start → first step |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, a, b in _pairs(s):
        lines.append(
            f"| `{label}` | {_cell(s.paired(a, b, 'step_ms', _ratio), '.3f', ' ×')} | "
            f"{_cell(s.paired(a, b, 'wall_s', _ratio), '.3f', ' ×')} | "
            f"{_cell(s.paired(a, b, 'launch_s', _ratio), '.3f', ' ×')} | "
            f"{_cell(s.paired(a, b, 'launch_s', _diff), '+.2f', ' s')} |"
        )
    return lines


def _scaling_table(s: Summary) -> list[str]:
    lines = [
        "| workload | contender | 1 process samples/s | 2-process DDP samples/s | "
        "DDP / 1 process |",
        "| --- | --- | --- | --- | --- |",
    ]
    for workload in ("mlp", "tiny"):
        for c in ("raw", "ddpkit", "lightning"):
            one, two = f"{workload}/{c}/single", f"{workload}/{c}/ddp"
            if one not in s.by_config or two not in s.by_config:
                continue
            lines.append(
                f"| {workload} | {c} | {_cell(s.spread(one, 'samples_s'), '.0f')} | "
                f"{_cell(s.spread(two, 'samples_s'), '.0f')} | "
                f"{_cell(s.paired(two, one, 'samples_s', _ratio), '.2f', ' ×')} |"
            )
    return lines


def _config_order(name: str) -> tuple[int, int, int, str]:
    workload, contender, mode = name.split("/")
    base = mode.replace("+on", "").replace("+cb", "")
    return (
        ("mlp", "tiny").index(workload) if workload in ("mlp", "tiny") else 9,
        ("single", "ddp", "spawn", "forkserver").index(base)
        if base in ("single", "ddp", "spawn", "forkserver")
        else 9,
        ("raw", "ddpkit", "lightning").index(contender),
        mode,
    )


def machine_meta(*, repeats: int, quick: bool, seconds: float) -> dict[str, Any]:
    import torch

    try:
        import pytorch_lightning as pl

        pl_version: str | None = pl.__version__
    except ImportError:
        pl_version = None
    import ddpkit

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "lightning": pl_version,
        "ddpkit": ddpkit.__version__,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu": platform.processor() or platform.machine(),
        "repeats": repeats,
        "quick": quick,
        "seconds": seconds,
    }


def markdown(s: Summary, meta: dict[str, Any], plot_name: str | None) -> str:
    """The whole ``RESULTS.md``."""
    from bench.workload import WORKLOADS

    mlp, tiny = WORKLOADS["mlp"], WORKLOADS["tiny"]
    head = [
        "# ddpkit benchmarks: raw PyTorch, ddpkit, Lightning",
        "",
        f"Generated by `python -m bench{' --gpu' if meta.get('gpu') else ''}"
        f"{' --quick' if meta['quick'] else ''}` on {meta['date']}"
        f" in {meta.get('measuring_s', meta['seconds']) / 60:.1f} min of runs: "
        f"{meta['cores']} cores, Python {meta['python']}, "
        f"torch {meta['torch']}, pytorch-lightning {meta['lightning'] or '(not installed)'}, "
        f"ddpkit {meta['ddpkit']}; {meta['repeats']} interleaved round(s). Cells: median "
        f"(min–max) over rounds; ratios are paired per round (both runs of one round), then the "
        f"median (min–max) of the per-round ratios.",
        "",
        f"Workloads (same seed, data order, optimizer and steps for every contender; the final "
        f"losses in the last table agree): **mlp**: {mlp.in_features} → {mlp.hidden} → "
        f"{mlp.hidden} → {mlp.classes} (ReLU), batch {mlp.batch} per rank, {mlp.steps} steps; "
        f"**tiny**: one `Linear({tiny.in_features}, {tiny.classes})`, batch {tiny.batch}, "
        f"{tiny.steps} steps. SGD with momentum; `training_step` logs the loss every step "
        f"(`self.log('loss', loss)`); the raw loop keeps the detached loss. Steady step: the "
        f"median time between optimizer steps after {mlp.warmup} (mlp) / {tiny.warmup} (tiny) "
        f"warm-up steps. Start → first step: from the driver's clock right before `Popen` to "
        f"the end of rank 0's first optimizer step. Lightning and ddpkit run with progress bar, "
        f"logger, checkpointing (and the model summary) off; `+on` rows leave them on; `+cb` "
        f"rows add `ModelCheckpoint(monitor='loss')`, `EarlyStopping('loss')` and a custom "
        f"callback with per-step hooks (compared with raw PyTorch without them).",
        "",
        "## Against the targets",
        "",
        *_targets_table(s),
        "",
        *_missed_notes(s),
    ]
    if plot_name:
        head += [f"![ratios]({plot_name})", ""]
    head += [READING_NOTE, ""]
    return "\n".join(
        [
            *head,
            "## Every run",
            "",
            *_configs_table(s),
            "",
            "## Ratios, paired per round",
            "",
            *_ratios_table(s),
            "",
            "## Scaling on this machine",
            "",
            *_scaling_table(s),
            "",
            SCALING_NOTE,
            "",
        ]
    )


SCALING_NOTE = """\
Two ranks on two cores do not train faster than one process here, for any contender, raw
PyTorch included: each rank gets one core (ranks × threads ≤ cores) instead of the two one
process uses, and every step also waits for a gloo all-reduce of the gradients over loopback.
That is the machine, not the trainer: the floor loses the same way. What to expect elsewhere
(not measured here): with a core budget per rank that stays the same as ranks are added (more
cores, more machines, one GPU per rank) and a step that computes for milliseconds, the
all-reduce overlaps the backward pass and samples/s grows with the ranks, less the all-reduce
time that does not overlap; ddpkit adds the per-step cost the ratios above show and its launch
cost once per run."""

READING_NOTE = """\
How to read these figures: the machine is shared and noisy, so only the paired ratios are
meaningful, and a ratio whose min–max range straddles 1.0 is a tie. A ddpkit median below the
floor (ratio < 1) is noise, not a speed-up over hand-written PyTorch: both run the same torch
calls (the same `DistributedDataParallel` with the same defaults, the same thread cap per rank)
and ddpkit only adds work."""


def plot(s: Summary, path: Path) -> bool:
    """A PNG of the paired ratios; ``False`` (and nothing written) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows: list[tuple[str, Spread | None, Spread | None]] = []
    if "ddpkit" in s.imports:
        pl = None
        if "lightning" in s.imports:
            dk, lt = s.imports["ddpkit"], s.imports["lightning"]
            pl = Spread.of([dk[r] / lt[r] for r in dk if r in lt])
        rows.append(("import (vs torch / Lightning)", s.import_ratio("ddpkit"), pl))
    for name in sorted(s.by_config, key=_config_order):
        workload, contender, mode = name.split("/")
        if contender != "ddpkit":
            continue
        base = mode.replace("+on", "").replace("+cb", "")
        raw, pl_name = f"{workload}/raw/{base}", f"{workload}/lightning/{mode}"
        rows.append(
            (
                f"{workload} {mode}: step",
                s.paired(name, raw, "step_ms", _ratio) if "+on" not in mode else None,
                s.paired(name, pl_name, "step_ms", _ratio),
            )
        )
        if mode in ("ddp", "spawn") and workload == "mlp":
            rows.append(
                (
                    f"{workload} {mode}: start → first step",
                    s.paired(name, raw, "launch_s", _ratio),
                    s.paired(name, pl_name, "launch_s", _ratio),
                )
            )
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.4))
    height = 0.38
    for i, (_, vs_raw, vs_pl) in enumerate(rows):
        for offset, spread, color, label in (
            (-height / 2, vs_raw, "tab:blue", "ddpkit / raw PyTorch"),
            (height / 2, vs_pl, "tab:orange", "ddpkit / Lightning"),
        ):
            if spread is None:
                continue
            ax.barh(
                i + offset,
                spread.mid,
                height,
                color=color,
                xerr=[[spread.mid - spread.lo], [spread.hi - spread.mid]],
                capsize=2,
                label=label if i == 0 or label not in ax.get_legend_handles_labels()[1] else None,
            )
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("ratio (median of paired rounds, min–max bars); < 1: ddpkit is faster")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("ddpkit against raw PyTorch and Lightning")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


TESTS_BEGIN = "<!-- bench.tests: written by `python -m bench.tests` -->"
TESTS_END = "<!-- /bench.tests -->"


def tests_section(text: str) -> str:
    """The section ``python -m bench.tests`` wrote into ``text`` ('' when there is none)."""
    start, end = text.find(TESTS_BEGIN), text.find(TESTS_END)
    if start < 0 or end < start:
        return ""
    return text[start : end + len(TESTS_END)] + "\n"


def with_section(text: str, section: str) -> str:
    """``text`` with its tests section replaced by ``section`` (appended if it had none)."""
    old = tests_section(text)
    block = f"{TESTS_BEGIN}\n{section}{TESTS_END}\n"
    if old:
        return text.replace(old, block)
    return text.rstrip("\n") + "\n\n" + block
