"""The ``tests`` workload: N 2-rank distributed tests and N standalone tests, run by ddpkit's
pytest plugin (warm start; and with fresh interpreters, as before it), by torch's own
``MultiProcessTestCase``, and as a fresh ``python -m pytest <id>`` per test (what Lightning's
standalone script does); and the ``forkserver`` start of ``DDPSpawnPlugin`` against today's spawn
and raw ``torch.multiprocessing`` spawn. Writes its section of ``bench/RESULTS.md``.

    python -m bench.tests                                  # 3 rounds, N = 10
    python -m bench.tests --n 5 --rounds 1 --lock /tmp/ddpkit-cpu.lock

Every figure is the wall time of whole commands (interpreter start included), contenders
interleaved in each round (the order rotates), on the same generated test files.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import readme, report
from bench.__main__ import HERE, REPO, Config, _locked, _run, measure

BODY = """t = torch.tensor([float(RANK + 1)])
tdist.all_reduce(t)
assert t.item() == 3.0"""

DISTRIBUTED = """
import pytest, torch
import torch.distributed as tdist

@pytest.mark.distributed(world_size=2)
@pytest.mark.parametrize("i", range({n}))
def test_all_reduce(dist, i):
    RANK = dist.rank
{body}
"""

MPTC = """
import torch
import torch.distributed as tdist
from torch.testing._internal.common_distributed import MultiProcessTestCase

class Tests(MultiProcessTestCase):
    @property
    def world_size(self):
        return 2

    def setUp(self):
        super().setUp()
        self._spawn_processes()

    def _body(self):
        store = tdist.FileStore(self.file_name, self.world_size)
        tdist.init_process_group("gloo", store=store, rank=self.rank, world_size=2)
        RANK = self.rank
{body}
        tdist.destroy_process_group()

for i in range({n}):
    setattr(Tests, f"test_{{i}}", lambda self: self._body())
"""

# A standalone test: a Trainer with DDPPlugin fits a tiny model on two ranks.
STANDALONE = """
import pytest, torch
from torch.utils.data import DataLoader, TensorDataset
import ddpkit

class Tiny(ddpkit.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

@pytest.mark.standalone
@pytest.mark.parametrize("i", range({n}))
def test_fit(tmp_path, i):
    data = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=8)
    trainer = ddpkit.Trainer(
        num_processes=2, plugins=[ddpkit.DDPPlugin()], max_steps=4, default_root_dir=tmp_path,
        enable_progress_bar=False, enable_checkpointing=False, logger=False,
    )
    trainer.fit(Tiny(), data)
"""

BASE = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
PLUGIN = ["-p", "ddpkit.testing.pytest_plugin"]


# A Lightning user's suite: its conftest imports Lightning (whose import reads RANK and
# LOCAL_RANK), and so does every MultiProcessTestCase rank that imports the test module.
LIGHTNING_CONFTEST = "import pytorch_lightning\n"
LIGHTNING_IMPORT = "import pytorch_lightning\n"
# A conftest that reads a per-test variable while the session collects keeps the session from
# forking itself into the zygote: the warm start's other path, the fresh-interpreter zygote.
ZYGOTE_CONFTEST = "import os\n\nos.environ.get('RANK')\n"


def write_files(root: Path, n: int) -> None:
    body = "\n".join("    " + line for line in BODY.splitlines())
    (root / "test_dist.py").write_text(DISTRIBUTED.format(n=n, body=body))
    (root / "test_dist_one.py").write_text(DISTRIBUTED.format(n=1, body=body))
    mptc_body = "\n".join("    " + line for line in body.splitlines())
    (root / "test_mptc.py").write_text(MPTC.format(n=n, body=mptc_body))
    (root / "test_alone.py").write_text(STANDALONE.format(n=n))
    lightning = root / "lightning"
    lightning.mkdir(exist_ok=True)
    (lightning / "conftest.py").write_text(LIGHTNING_CONFTEST)
    (lightning / "test_dist_pl.py").write_text(DISTRIBUTED.format(n=n, body=body))
    (lightning / "test_mptc_pl.py").write_text(LIGHTNING_IMPORT + MPTC.format(n=n, body=mptc_body))
    zygote = root / "zygote"
    zygote.mkdir(exist_ok=True)
    (zygote / "conftest.py").write_text(ZYGOTE_CONFTEST)
    (zygote / "test_dist_z.py").write_text(DISTRIBUTED.format(n=n, body=body))
    (zygote / "test_alone_z.py").write_text(STANDALONE.format(n=n))


def contenders(root: Path, n: int) -> dict[str, list[list[str]]]:
    """Each contender: the commands it runs (their wall times add up)."""
    # Lightning's script marks the process with an environment variable so that the ranks its
    # Trainer starts re-run that one test; ddpkit's equivalent:
    fresh_env = ["env", "DDPKIT_STANDALONE_CHILD=1"]
    # Without ddpkit's plugin the mark is the session's own (ddpkit's marker check stops a
    # session that uses an undeclared one).
    PLAIN_MARK = ["-o", "markers=standalone"]
    PYTEST = [*BASE, f"--rootdir={root}"]

    def at(name: str) -> str:
        return str(root / name)

    return {
        "distributed/ddpkit": [[*PYTEST, *PLUGIN, at("test_dist.py")]],
        "distributed/ddpkit, 1 test": [[*PYTEST, *PLUGIN, at("test_dist_one.py")]],
        "distributed/ddpkit, fresh interpreters": [
            [*PYTEST, *PLUGIN, "--ddpkit-fresh-interpreter", at("test_dist.py")]
        ],
        "distributed/ddpkit, fresh-interpreter zygote": [
            [*PYTEST, *PLUGIN, at("zygote/test_dist_z.py")]
        ],
        "distributed/MultiProcessTestCase": [[*PYTEST, at("test_mptc.py")]],
        "distributed/python -m pytest <id> per test": [
            [*PYTEST, *PLUGIN, at("test_dist.py") + f"::test_all_reduce[{i}]"] for i in range(n)
        ],
        "distributed, Lightning imported/ddpkit": [
            [*PYTEST, *PLUGIN, at("lightning/test_dist_pl.py")]
        ],
        "distributed, Lightning imported/MultiProcessTestCase": [
            [*PYTEST, at("lightning/test_mptc_pl.py")]
        ],
        "standalone/ddpkit": [[*PYTEST, *PLUGIN, at("test_alone.py")]],
        "standalone/ddpkit, fresh-interpreter zygote": [
            [*PYTEST, *PLUGIN, at("zygote/test_alone_z.py")]
        ],
        "standalone/ddpkit, fresh interpreters": [
            [*PYTEST, *PLUGIN, "--ddpkit-fresh-interpreter", at("test_alone.py")]
        ],
        "standalone/python -m pytest <id> per test": [
            [*fresh_env, *PYTEST, *PLAIN_MARK, at("test_alone.py") + f"::test_fit[{i}]"]
            for i in range(n)
        ],
    }


def run_commands(commands: list[list[str]], log: Path, env: dict[str, str]) -> float:
    return sum(_run(command, env, log) for command in commands)


START = [Config("mlp", "raw", "spawn"), Config("mlp", "ddpkit", "spawn")]
START.append(Config("mlp", "ddpkit", "forkserver"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tests", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=10, help="tests of each kind (default 10)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--lock", default=None, help="flock(2) this file around each round")
    p.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = p.parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONWARNINGS", "ignore")
    walls: dict[str, dict[int, float]] = {}
    starts: dict[str, dict[int, float]] = {}
    with tempfile.TemporaryDirectory(prefix="ddpkit-bench-tests-") as tmp:
        root = Path(tmp)
        write_files(root, args.n)
        runs = contenders(root, args.n)
        for r in range(args.rounds):
            with _locked(args.lock):
                names = list(runs)
                names = names[r % len(names) :] + names[: r % len(names)]
                for name in names:
                    wall = run_commands(runs[name], root / "run.log", env)
                    walls.setdefault(name, {})[r] = wall
                    print(f"[{r + 1}/{args.rounds}] {name:<48} {wall:7.2f} s", flush=True)
                for config in START:
                    data = measure(config, None, env, root)
                    launch = report.run_figures(data, None)["launch_s"]
                    starts.setdefault(config.name, {})[r] = launch
                    print(f"[{r + 1}/{args.rounds}] {config.name:<48} {launch:7.2f} s", flush=True)
    raw = {"n": args.n, "rounds": args.rounds, "walls": walls, "starts": starts}
    raw["environment"] = environment()
    (HERE / "tests.json").write_text(json.dumps(raw, indent=1))
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    out.write_text(report.with_section(text, section(raw)))
    if out == HERE / "RESULTS.md":
        readme.update()  # the README's figures are these
    print(f"wrote the tests section of {out}", flush=True)
    return 0


#: What a Lightning user has installed besides torch and Lightning: scipy's OpenBLAS (which
#: torchmetrics loads) starts a thread pool at import, the warm start's test (docs/testing.md).
USER_LIBRARIES = ("numpy", "scipy", "scikit-learn", "pandas", "threadpoolctl")


def environment() -> str:
    """The machine and the user libraries the run had, for the section's header."""
    found = []
    for name in USER_LIBRARIES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"no {name}")
    return f"{os.cpu_count()} cores; installed: {', '.join(found)}"


def _spread(values: dict[int, float]) -> report.Spread:
    return report.Spread.of(list(values.values()))


def _paired(a: dict[int, float], b: dict[int, float]) -> report.Spread:
    return report.Spread.of([a[r] / b[r] for r in a if r in b])


#: (kind, target): ddpkit's session of N 2-rank tests against MultiProcessTestCase's.
TEST_TARGETS = (("distributed", 0.20), ("distributed, Lightning imported", 0.20))


def _test_targets(walls: dict[str, dict[int, float]]) -> list[str]:
    lines = [
        "| tests | ddpkit / MultiProcessTestCase | target | met |",
        "| --- | --- | --- | --- |",
    ]
    for kind, limit in TEST_TARGETS:
        mine, theirs = walls.get(f"{kind}/ddpkit"), walls.get(f"{kind}/MultiProcessTestCase")
        if not mine or not theirs:
            continue
        ratio = _paired(mine, theirs)
        met = "yes" if ratio.mid <= limit else "no"
        lines.append(f"| {kind} | {ratio.fmt('.3f', ' ×')} | ≤ {limit:.2f} × | {met} |")
    # The strictest reading: a Lightning user's suite against MultiProcessTestCase's plain one
    # (whose ranks never import Lightning).
    mine, theirs = (
        walls.get("distributed, Lightning imported/ddpkit"),
        walls.get("distributed/MultiProcessTestCase"),
    )
    if mine and theirs:
        ratio = _paired(mine, theirs)
        met = "yes" if ratio.mid <= TEST_TARGETS[1][1] else "no"
        lines.append(
            f"| distributed, Lightning imported, against the plain MultiProcessTestCase | "
            f"{ratio.fmt('.3f', ' ×')} | ≤ {TEST_TARGETS[1][1]:.2f} × | {met} |"
        )
    return lines


def section(raw: dict[str, Any]) -> str:
    """The markdown of this workload's section of RESULTS.md."""
    n, walls, starts = raw["n"], raw["walls"], raw["starts"]
    lines = [
        f"## Tests: {n} distributed and {n} standalone tests",
        "",
        f"Generated by `python -m bench.tests --n {n} --rounds {raw['rounds']}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
        f"({raw.get('environment') or environment()}). Wall time of whole pytest "
        f"commands (interpreter start included), median (min–max) over rounds, contenders "
        f"interleaved. **distributed**: a 2-rank gloo test doing one `all_reduce`. "
        f"**standalone**: a test whose `Trainer(num_processes=2, plugins=[DDPPlugin()])` fits "
        f"a `Linear(8, 1)` for 4 steps (MultiProcessTestCase has no such test: its ranks are the "
        f"test's own processes). `python -m pytest <id> per test`: one "
        f"session per test id, as Lightning's standalone script runs them. `ddpkit, "
        f"fresh-interpreter zygote`: the same tests beside a conftest that reads RANK at "
        f"collection, so that the session cannot fork itself and the warm start's other path "
        f"serves them. **distributed, "
        f"Lightning imported**: the same distributed tests in a folder whose conftest imports "
        f"pytorch_lightning (a Lightning user's suite; Lightning reads RANK and LOCAL_RANK at "
        f"import), against MultiProcessTestCase with a test module that imports it too.",
        "",
        "| workload | contender | wall | per test | ddpkit / this |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in walls:
        kind, contender = name.split("/", 1)
        if contender == "ddpkit, 1 test":
            continue
        mine = walls[f"{kind}/ddpkit"]
        ratio = "—" if contender == "ddpkit" else _paired(mine, walls[name]).fmt(".3f", " ×")
        per = report.Spread.of([v / n for v in walls[name].values()]).fmt(".3g", " s")
        lines.append(
            f"| {kind} | {contender} | {_spread(walls[name]).fmt('.3g', ' s')} | {per} | {ratio} |"
        )
    lines += ["", *_test_targets(walls)]
    one, many = walls["distributed/ddpkit, 1 test"], walls["distributed/ddpkit"]
    marginal = report.Spread.of([(many[r] - one[r]) / (n - 1) for r in many if r in one])
    lines += [
        "",
        f"What one more 2-rank distributed test costs in a ddpkit session (its body is one "
        f"`all_reduce`, about a millisecond): (session of {n} − session of 1) / {n - 1} = "
        f"{marginal.fmt('.3g', ' s')} (target ≤ 0.3 s). The zygote is the session itself, "
        f"forked after collection (a fresh interpreter per pytest-xdist worker, started once).",
        "",
        "### `DDPSpawnPlugin(start_method='forkserver')`: process start → first step",
        "",
        "| run | start → first step | vs `mlp/raw/spawn` |",
        "| --- | --- | --- |",
    ]
    raw_spawn = starts["mlp/raw/spawn"]
    for name, values in starts.items():
        vs = "—" if name == "mlp/raw/spawn" else _paired(values, raw_spawn).fmt(".3f", " ×")
        lines.append(f"| `{name}` | {_spread(values).fmt('.3g', ' s')} | {vs} |")
    lines += [
        "",
        "The forkserver imports torch, ddpkit and the main module once and forks the ranks from "
        "there; it outlives the launch (as Python's forkserver does), so a later stage of the "
        "same process starts its ranks without importing anything. For a single first stage "
        "on two cores it is no faster than spawn (the server's own imports come before any "
        "rank starts): it stays opt-in.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
