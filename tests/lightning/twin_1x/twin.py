"""The twin harness: one unchanged Lightning 1.x script run on real Lightning 1.9.5 and on
``python -m ddpkit.lightning``, and what each run did compared.

ddpkit.lightning claims 1.x's semantics on Lightning 2.x; the only authority on those is a real
1.x. ``scripts/setup.sh test`` installs pytorch-lightning 1.9.5 (the last 1.x) into
``.venv/pl19``, a folder of its own that only the 1.9.5 side has on its path; both sides use the
venv's interpreter, torch and Lightning's other dependencies. Each side runs in a folder of its
own, as a subprocess in a session of its own with a timeout, and its script writes an effects
JSON (``scripts/effects_1x.py``): the weights, ``callback_metrics``, the CSV rows, the
checkpoints, the hook calls, the counters. :func:`normalise` takes out of both the differences
ddpkit documents (:data:`DELIBERATE`, each rule citing the line of the docs), and
:func:`differences` compares what is left field by field, floats within a tolerance, and says
where they differ in lines a reader can act on.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DELIBERATE",
    "DEVICES",
    "DEVICE_KEYWORDS",
    "Effects",
    "PL19",
    "Run",
    "SCRIPTS",
    "Twin",
    "differences",
    "normalise",
    "run_side",
    "run_twin",
]

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
REPO = HERE.parents[2]
#: Lightning 1.9.5 and setuptools<70 (its pkg_resources), installed by ``scripts/setup.sh test``.
PL19 = REPO / ".venv" / "pl19"

#: The device flags of each kind of run: (1.9.5's, ddpkit's). They differ only where 1.9 removed
#: the 1.x spelling: ddpkit gets ``accelerator="ddp_cpu"`` / ``"ddp"`` with ``num_processes``,
#: 1.9.5 the spelling it kept for the same run. For ddpkit's spawn 1.9.5 runs ``ddp_fork``, the
#: same launcher (the parent does not train; the ranks' results come back to it): its
#: ``ddp_spawn`` on CPU passes the module through ``mp.spawn``, which puts the parameters in
#: shared memory, so every rank's optimizer steps the same tensors (Lightning 2.0 fixed it with
#: ``_disable_module_memory_sharing``) and the weights depend on the ranks' timing.
DEVICES: dict[str, tuple[list[str], list[str]]] = {
    "one": (["--accelerator", "cpu", "--devices", "1"], ["--accelerator", "cpu", "--devices", "1"]),
    "spawn": (["--accelerator", "cpu", "--devices", "2", "--strategy", "ddp_fork"],
              ["--accelerator", "ddp_cpu", "--num_processes", "2"]),
    "ddp": (["--accelerator", "cpu", "--devices", "2", "--strategy", "ddp"],
            ["--accelerator", "ddp", "--num_processes", "2"]),
}  # fmt: skip


@dataclass(frozen=True)
class Run:
    """One side's run: where it ran, how it ended, what it wrote."""

    side: str
    folder: Path
    returncode: int
    stderr: str
    effects: dict[str, Any] | None

    def failure(self) -> str:
        """The end of its stderr, for a message."""
        return f"{self.side} exited {self.returncode}; stderr ends:\n{self.stderr[-5000:]}"


@dataclass(frozen=True)
class Twin:
    """The same script's run on Lightning 1.9.5 and on ddpkit."""

    pl19: Run
    ddpkit: Run


def _command(side: str, script: Path, arguments: list[str]) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != PL19]
    if side == "pl19":
        path.insert(0, str(PL19))
        command = [sys.executable, str(script), *arguments]
    else:
        command = [sys.executable, "-m", "ddpkit.lightning", str(script), *arguments]
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    else:
        env.pop("PYTHONPATH", None)
    return command, env


@dataclass(frozen=True)
class _Started:
    side: str
    folder: Path
    target: Path
    proc: subprocess.Popen[str]


def _start(
    side: str, script: str, arguments: Sequence[str], folder: Path, effects: str
) -> _Started:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{effects}.json"
    arguments = [a.format(out=folder, effects=target) for a in arguments]
    command, env = _command(side, SCRIPTS / script, arguments)
    proc = subprocess.Popen(
        command, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    return _Started(side, folder, target, proc)


def _finish(started: _Started, timeout: float) -> Run:
    proc = started.proc
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the script and every rank it started
        output, _ = proc.communicate()
        output += f"\n[twin harness: killed after {timeout} s]"
    written = None
    if proc.returncode == 0 and started.target.exists():  # the folder as "<out>" in every path
        written = json.loads(started.target.read_text().replace(str(started.folder), "<out>"))
    return Run(started.side, started.folder, proc.returncode, output, written)


def run_side(
    side: str,
    script: str,
    arguments: Sequence[str],
    folder: Path,
    *,
    effects: str = "effects",
    timeout: float = 180,
) -> Run:
    """Run ``scripts/<script>`` as ``side`` (``"pl19"`` or ``"ddpkit"``) in ``folder``, with
    ``{out}`` and ``{effects}`` in ``arguments`` replaced by the folder and the effects file
    (``<effects>.json`` there); killed with its ranks after ``timeout`` seconds."""
    return _finish(_start(side, script, arguments, folder, effects), timeout)


def run_twin(
    script: str,
    pl19_arguments: Sequence[str],
    ddpkit_arguments: Sequence[str],
    workdir: Path,
    *,
    effects: str = "effects",
    timeout: float = 180,
) -> Twin:
    """The same script run both ways at once, each side in ``workdir/<side>``: 1.9.5 as
    ``PYTHONPATH=.venv/pl19 python script.py ARGS``, ddpkit as ``python -m ddpkit.lightning
    script.py ARGS`` (without that folder on its path)."""
    pl19 = _start("pl19", script, pl19_arguments, workdir / "pl19", effects)
    ddpkit = _start("ddpkit", script, ddpkit_arguments, workdir / "ddpkit", effects)
    return Twin(_finish(pl19, timeout), _finish(ddpkit, timeout))


def _close(a: float, b: float, tolerance: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def differences(expected: Any, actual: Any, *, tolerance: float = 1e-6, at: str = "") -> list[str]:
    """Where ``actual`` (ddpkit's) differs from ``expected`` (1.9.5's), one line each: numbers
    within ``tolerance`` (relative or absolute) are equal; lists of strings (the hook calls) are
    shown as a unified diff."""
    where = at or "<effects>"
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = []
        for key in sorted(set(expected) | set(actual), key=str):
            path = f"{at}.{key}" if at else str(key)
            if key not in actual:
                found.append(f"{path}: only on 1.9.5: {_short(expected[key])}")
            elif key not in expected:
                found.append(f"{path}: only on ddpkit: {_short(actual[key])}")
            else:
                found += differences(expected[key], actual[key], tolerance=tolerance, at=path)
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        strings = all(isinstance(v, str) for v in [*expected, *actual])
        if strings and expected != actual:
            diff = difflib.unified_diff(expected, actual, "1.9.5", "ddpkit", lineterm="", n=2)
            return [f"{where}: the lists differ (- 1.9.5, + ddpkit):", *list(diff)[2:]]
        if len(expected) != len(actual):
            return [
                f"{where}: {len(expected)} items on 1.9.5, {len(actual)} on ddpkit: "
                f"{_short(expected)} vs {_short(actual)}"
            ]
        found = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            found += differences(e, a, tolerance=tolerance, at=f"{at}[{i}]")
        return found
    if _number(expected) and _number(actual):
        if _close(float(expected), float(actual), tolerance):
            return []
        return [f"{where}: {expected!r} on 1.9.5, {actual!r} on ddpkit"]
    if expected != actual:
        return [f"{where}: {_short(expected)} on 1.9.5, {_short(actual)} on ddpkit"]
    return []


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


Effects = dict[str, Any]


def _ddpkit_rng_states(pl19: Effects, ddpkit: Effects) -> None:
    """docs/reliability.md, "each rank's RNG states ... which every checkpoint a fit writes
    carries": ddpkit's ``ddpkit_rng`` key in every checkpoint, and ``RestartState``, the callback
    that writes it."""
    for saved in ddpkit.get("checkpoints", {}).values():
        saved["keys"] = [k for k in saved["keys"] if k != "ddpkit_rng"]
    ddpkit["hooks"] = [c.replace("ddpkit_rng,", "") for c in ddpkit.get("hooks", [])]
    facts = ddpkit.get("trainer", {})
    facts["callbacks"] = [c for c in facts.get("callbacks", []) if c != "RestartState"]


def _accumulation_callback(pl19: Effects, ddpkit: Effects) -> None:
    """docs/lightning.md, the keywords table (``accumulate_grad_batches``): 1.x accumulated
    through a ``GradientAccumulationScheduler`` it always added; Lightning 2.x's loop does it
    itself and adds that callback only for a schedule."""
    facts, theirs = pl19.get("trainer", {}), ddpkit.get("trainer", {}).get("callbacks", [])
    if "GradientAccumulationScheduler" not in theirs:
        facts["callbacks"] = [
            c for c in facts.get("callbacks", []) if c != "GradientAccumulationScheduler"
        ]


#: Defaults 1.x releases disagreed on, which ddpkit's parser takes from an earlier release: the
#: keywords table maps each onto the value 1.9.5 has (``max_steps=None`` → ``-1``;
#: ``accumulate_grad_batches`` ``None`` → ``1``).
_SAME_DEFAULT = {"max_steps": (None, -1), "accumulate_grad_batches": (None, 1)}


#: Where Lightning 2.x's Trainer signature says ``None`` ("decide") or ``"auto"`` for what 1.9.5's
#: said outright: the same Trainer (its ``LightningCLI`` config shows the signature's defaults).
_SAME_CHOICE = {
    "enable_checkpointing": (True, None),
    "enable_model_summary": (True, None),
    "logger": (True, None),
    "num_sanity_val_steps": (2, None),
    "precision": (32, None),
    "strategy": (None, "auto"),
}


def _argparse_keywords(pl19: Effects, ddpkit: Effects) -> None:
    """docs/lightning.md, "One ``--<keyword>`` per Trainer keyword of 1.x and 2.x" (and, for
    ``LightningCLI``, "Lightning 2.x's own, training ``ddpkit.lightning.Trainer``, whose signature
    holds the 1.x keywords"): ddpkit's parser also has the keywords 1.9 had removed and 2.x's own;
    the values of 1.9.5's keywords compare."""
    for name in ("namespace", "config"):
        ours, theirs = pl19.get(name), ddpkit.get(name)
        if not isinstance(ours, dict) or not isinstance(theirs, dict):
            continue
        for key in set(theirs) - set(ours):
            del theirs[key]
        for key, same in {**_SAME_DEFAULT, **_SAME_CHOICE}.items():
            if key in ours and ours.get(key) in same and theirs.get(key) in same:
                theirs[key] = ours[key]


_SAVE = re.compile(r"^(callback|module)\.on_save_checkpoint\(")


def _epoch_end_saves(pl19: Effects, ddpkit: Effects) -> None:
    """docs/flags.md, Differences from Lightning: Lightning 2.x runs ``ModelCheckpoint`` /
    ``EarlyStopping``'s ``on_train_epoch_end`` after the module's, 1.9.5 before it; 1.9.5's
    saves there move after the module's hook."""
    hooks, moved = pl19.get("hooks", []), []
    for call in hooks:
        if call == "module.on_train_epoch_end()":
            saves = []
            while moved and _SAVE.match(moved[-1]):
                saves.insert(0, moved.pop())
            moved += [call, *saves]
        else:
            moved.append(call)
    pl19["hooks"] = moved


_STEP = re.compile(r"(global_step=|step=)(\d+)")


def _steps_count_batches(pl19: Effects, ddpkit: Effects) -> None:
    """docs/lightning.md, several optimizers: "``trainer.global_step`` counts batches, as in
    Lightning 1.0–1.5"; 1.6–1.9 counted optimizer steps, two a batch for a GAN. 1.9.5's step numbers
    (the counter, the checkpoints' and their names) become the batch counts they stand for, read
    from its own ``on_train_batch_end`` calls (a spawn's parent has no optimizers: the
    second optimizer's steps in the hooks say there are several)."""
    hooks = pl19.get("hooks", [])
    if not any(c.startswith("callback.on_before_optimizer_step(opt_idx=1") for c in hooks):
        return
    batches, count = {0: 0}, 0
    for call in hooks:
        found = re.match(r"callback\.on_train_batch_end\(.*global_step=(\d+)", call)
        if found:
            count += 1
            batches[int(found[1])] = count

    def step(text: str) -> str:
        return _STEP.sub(lambda m: f"{m[1]}{batches.get(int(m[2]), int(m[2]))}", text)

    pl19["global_step"] = batches.get(pl19["global_step"], pl19["global_step"])
    pl19["hooks"] = [step(c) for c in hooks]
    pl19["checkpoints"] = {
        step(name): {**saved, "global_step": batches.get(saved["global_step"], -1)}
        for name, saved in pl19.get("checkpoints", {}).items()
    }
    for key in ("best_model", "last_model"):
        if isinstance(pl19.get(key), str):
            pl19[key] = step(pl19[key])


def _cli_instantiator(pl19: Effects, ddpkit: Effects) -> None:
    """docs/flags.md, Differences from Lightning: Lightning 2.x's ``LightningCLI`` adds to the
    hyperparameters the ``_instantiator`` that rebuilds the module from a checkpoint."""
    for saved in ddpkit.get("checkpoints", {}).values():
        saved["hyper_parameters"] = re.sub(
            r"_instantiator:'[^']*',?", "", saved["hyper_parameters"]
        )


def _log_dir(pl19: Effects, ddpkit: Effects) -> None:
    """docs/flags.md, Differences from Lightning: Lightning 2.x's ``trainer.log_dir`` of a
    ``CSVLogger`` is its version folder (1.9: its ``save_dir``), where ``LightningCLI`` saves
    ``config.yaml``: each run a version folder of its own (1.9.5 overwrote one file). The file
    names compare."""
    for side in (pl19, ddpkit):
        if "saved_configs" in side:
            side["saved_configs"] = sorted({os.path.basename(p) for p in side["saved_configs"]})


def _learning_rates_as_metrics(pl19: Effects, ddpkit: Effects) -> None:
    """docs/flags.md, Differences from Lightning: Lightning 2.x's ``LearningRateMonitor`` also
    puts the rates it logs (``lr-*``) in ``trainer.callback_metrics``; 1.9.5's only logs them."""
    for name in ("callback_metrics", "metrics_after_fit", "metrics_after_test"):
        metrics = ddpkit.get(name, {})
        for key in [k for k in metrics if k.startswith("lr-")]:
            if key not in pl19.get(name, {}):
                del metrics[key]


def _spawn_parent_state(pl19: Effects, ddpkit: Effects) -> None:
    """docs/lightning.md, "A second ``trainer.fit``": under ``DDPSpawnPlugin`` "ddpkit's spawn
    launcher ... brings rank zero's fit-loop and callback states back with the weights, so
    ``trainer.current_epoch`` and ``global_step`` are rank zero's after ``fit``" (docs/flags.md,
    Differences: Lightning's spawn leaves them at 0). 1.9.5's parent keeps its own: the
    counters, the checkpoint's score and last path, the early stopping's state are left out, and
    so are the step and epoch that the stages after ``fit`` (their own ``metrics.csv``) log from
    the parent's counters."""
    for side in (pl19, ddpkit):
        for key in ("global_step", "current_epoch", "best_model_score", "last_model"):
            side.pop(key, None)
        side.pop("early_stopping", None)
        for path in sorted(side.get("csv", {}))[1:]:
            side["csv"][path] = [
                {k: v for k, v in row.items() if k not in ("step", "epoch")}
                for row in side["csv"][path]
            ]


#: Each a difference ddpkit documents (its docstring cites the line): applied to copies of both
#: sides' effects before they are compared.
DELIBERATE: list[Callable[[Effects, Effects], None]] = [
    _ddpkit_rng_states,
    _accumulation_callback,
    _argparse_keywords,
    _epoch_end_saves,
    _steps_count_batches,
    _cli_instantiator,
    _log_dir,
    _learning_rates_as_metrics,
]

#: The device flags, which differ between the sides by design where 1.9 removed the 1.x spelling.
DEVICE_KEYWORDS = ("accelerator", "devices", "num_processes", "strategy", "gpus", "plugins")


def normalise(pl19: Effects, ddpkit: Effects, kind: str = "one") -> tuple[Effects, Effects]:
    """Copies of both sides' effects with :data:`DELIBERATE` applied; for a run on several
    processes (``kind``, a key of :data:`DEVICES`) the parsed device keywords are left out too,
    and for spawn what :func:`_spawn_parent_state` says."""
    ours, theirs = copy.deepcopy(pl19), copy.deepcopy(ddpkit)
    for rule in DELIBERATE:
        rule(ours, theirs)
    if kind != "one":
        for side in (ours, theirs):
            for key in DEVICE_KEYWORDS:
                side.get("namespace", {}).pop(key, None)
    if kind == "spawn":
        _spawn_parent_state(ours, theirs)
    return ours, theirs
