"""Run every contender side by side and write ``bench/RESULTS.md`` and ``bench/ratios.png``.

    python -m bench                      # 5 interleaved rounds, ~10 minutes on 2 cores
    python -m bench --quick              # 1 round, few steps: a smoke test
    python -m bench --only 'tiny/(raw|ddpkit)/single' --repeats 9
    python -m bench --lock /tmp/ddpkit-cpu.lock   # hold this flock(2) lock for each round

Each run is a fresh process (``python -m bench.run_<contender>``), started with ``BENCH_T0`` =
the wall clock right before ``Popen``; rank zero writes its figures to ``BENCH_RESULT``. Rounds
interleave the contenders (the order rotates every round), so a ratio compares runs made under
the same machine load; the report gives min / median / max over rounds.

On a shared machine, pass ``--lock`` with the lock the other users take (or wrap the whole
command in ``flock``, without ``--lock``): then no other training run overlaps a measurement.
The lock is held for one round at a time (a few minutes), so the runs of a round are made back to
back and other users get the machine between rounds.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import fcntl
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import readme, report

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RUN_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Config:
    workload: str
    contender: str  # raw | ddpkit | lightning
    mode: str  # single | ddp | spawn
    #: Lightning and ddpkit: "on" = progress bar, logger, checkpoints (summary); "callbacks" =
    #: ModelCheckpoint + EarlyStopping + a custom callback with per-step hooks, the rest off
    features: str = "off"

    @property
    def name(self) -> str:
        suffix = {"off": "", "on": "+on", "callbacks": "+cb"}[self.features]
        return f"{self.workload}/{self.contender}/{self.mode}{suffix}"


def default_configs(with_lightning: bool) -> list[Config]:
    contenders = ["raw", "ddpkit"] + (["lightning"] if with_lightning else [])
    configs = [Config("mlp", c, m) for m in ("single", "ddp", "spawn") for c in contenders]
    configs += [Config("tiny", c, m) for m in ("single", "ddp") for c in contenders]
    configs += [Config("mlp", c, "single", "on") for c in contenders if c != "raw"]
    configs += [
        Config(w, c, "single", "callbacks")
        for w in ("mlp", "tiny")
        for c in contenders
        if c != "raw"
    ]
    return configs


#: What a user's script imports, per contender (``import ddpkit`` alone imports no torch: its
#: names come on first use, so the figure is what a training script really pays).
IMPORTS = {
    "torch": "import torch",
    "ddpkit": "from ddpkit import Module, Trainer",
    "lightning": "import pytorch_lightning",
}


def _python() -> str:
    return sys.executable


@contextlib.contextmanager
def _locked(path: str | None) -> Iterator[None]:
    if path is None:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(command: list[str], env: dict[str, str], log: Path) -> float:
    """Start ``command`` (its own session, output to ``log``); return its wall time."""
    with log.open("wb") as out:
        env = dict(env)
        t0 = time.time()
        env["BENCH_T0"] = repr(t0)
        proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = -signal.SIGKILL
        wall = time.time() - t0
    if code != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(command)} exited with {code}:\n{tail}")
    return wall


def measure_import(name: str, env: dict[str, str], tmp: Path) -> float:
    return _run([_python(), "-c", IMPORTS[name]], env, tmp / f"import-{name}.log")


def measure(config: Config, steps: int | None, env: dict[str, str], tmp: Path) -> dict[str, Any]:
    slug = config.name.replace("/", "-").replace("+", "-")
    result = tmp / f"{slug}.json"
    result.unlink(missing_ok=True)
    root = tmp / f"root-{slug}"
    command = [
        _python(),
        "-m",
        f"bench.run_{config.contender}",
        "--workload",
        config.workload,
        "--mode",
        config.mode,
        "--features",
        config.features,
        "--root",
        str(root),
    ]
    if steps is not None:
        command += ["--steps", str(steps)]
    try:
        wall = _run(command, dict(env, BENCH_RESULT=str(result)), tmp / f"{slug}.log")
    except RuntimeError as err:
        # One crash of one run (a rank aborted at exit, say) does not end a 20-minute bench:
        # it is said, and the run is made again; a second failure ends it.
        print(f"{config.name}: the run failed, running it again once: {err}", flush=True)
        wall = _run(command, dict(env, BENCH_RESULT=str(result)), tmp / f"{slug}.log")
    shutil.rmtree(root, ignore_errors=True)
    data: dict[str, Any] = json.loads(result.read_text())
    data["wall_s"] = wall
    data["config"] = config.name
    return data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="1 round, few steps (a smoke test)")
    p.add_argument("--repeats", type=int, default=None, help="rounds (default 5; quick: 1)")
    p.add_argument("--only", default=None, help="regex on config names, e.g. 'tiny/.*/single'")
    p.add_argument("--no-lightning", action="store_true", help="leave Lightning out")
    p.add_argument("--no-imports", action="store_true", help="skip the import-time figures")
    p.add_argument("--out", default=str(HERE), help="where RESULTS.md, results.json go")
    p.add_argument("--no-plot", action="store_true", help="no PNG even with matplotlib")
    p.add_argument("--lock", default=None, help="flock(2) this file around each round")
    p.add_argument("--gpu", action="store_true", help="one process on cuda:0 (the single runs)")
    args = p.parse_args(argv)

    repeats = args.repeats or (1 if args.quick else 5)
    with_lightning = not args.no_lightning and importlib.util.find_spec("pytorch_lightning")
    configs = default_configs(bool(with_lightning))
    if args.gpu:  # one GPU: the 1-process runs (the DDP launchers need a GPU per rank)
        configs = [c for c in configs if c.mode == "single"]
    if args.only:
        configs = [c for c in configs if re.search(args.only, c.name)]
    steps = {"mlp": 60, "tiny": 200} if args.quick else {}
    warmup = {"mlp": 20, "tiny": 50} if args.quick else {}
    modules = ["torch", "ddpkit"] + (["lightning"] if with_lightning else [])
    if args.no_imports:
        modules = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    env.pop("BENCH_RESULT", None)
    env["BENCH_DEVICE"] = "cuda" if args.gpu else "cpu"
    # Lightning's "tip" banner and warnings go to the run logs; keep the console readable.
    env.setdefault("PYTHONWARNINGS", "ignore")

    started = time.time()
    measuring = 0.0  # inside the lock: the figure the 15-minute budget is about
    runs: list[dict[str, Any]] = []
    imports: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ddpkit-bench-") as tmp_name:
        tmp = Path(tmp_name)
        # Byte code, as an installed package has it (PYTHONDONTWRITEBYTECODE would otherwise
        # leave ddpkit and bench compiling their sources in every process, while torch and
        # Lightning load theirs from site-packages).
        compileall.compile_dir(REPO / "src" / "ddpkit", quiet=1)
        compileall.compile_dir(HERE, quiet=1)
        # Untimed: the first start after boot pays for a cold page cache.
        warm = "import torch, torch._dynamo; from ddpkit import Module, Trainer" + (
            "; import pytorch_lightning" * bool(with_lightning)
        )
        if not args.quick:  # a smoke test's figures mean nothing: no warm-up run for it
            _run([_python(), "-c", warm], env, tmp / "warm.log")
        for r in range(repeats):
            with _locked(args.lock):
                round_started = time.time()
                for m in modules:
                    seconds = measure_import(m, env, tmp)
                    imports.append({"module": m, "repeat": r, "seconds": seconds})
                shift = r % max(1, len(configs))
                for config in configs[shift:] + configs[:shift]:
                    data = measure(config, steps.get(config.workload), env, tmp)
                    data["repeat"] = r
                    runs.append(data)
                    fig = report.run_figures(data, warmup.get(config.workload))
                    print(
                        f"[{r + 1}/{repeats}] {config.name:<26} wall {fig['wall_s']:6.2f} s  "
                        f"first step {fig['launch_s']:5.2f} s  step {fig['step_ms']:7.3f} ms  "
                        f"{fig['samples_s']:9.0f} samples/s  loss {fig['final_loss']:.5f}",
                        flush=True,
                    )
                measuring += time.time() - round_started
    meta = report.machine_meta(repeats=repeats, quick=args.quick, seconds=time.time() - started)
    meta["gpu"] = args.gpu
    meta["measuring_s"] = measuring
    raw = {"meta": meta, "runs": runs, "imports": imports, "warmup": warmup}
    (out / "results.json").write_text(json.dumps(raw, indent=1))
    summary = report.summarize(raw)
    plot_name = None
    if not args.no_plot and report.plot(summary, out / "ratios.png"):
        plot_name = "ratios.png"
    results = out / "RESULTS.md"
    # The tests workload's section (python -m bench.tests) is its own: kept as it was.
    kept = report.tests_section(results.read_text()) if results.exists() else ""
    text = report.markdown(summary, meta, plot_name)
    results.write_text(text + ("\n" + kept if kept else ""))
    if out == HERE:
        readme.update()  # the README's figures are these
    print(
        f"wrote {out / 'RESULTS.md'}: {measuring:.0f} s of runs, {meta['seconds']:.0f} s in all",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
