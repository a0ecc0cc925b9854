"""Real Lightning 1.x projects run on ddpkit with only the changes docs/lightning.md's porting
section lists — its one rule (sed's), or none through ``python -m ddpkit.lightning``:
Lightning's own ``pl_examples`` of 1.2.0 and 1.4.0 and the 1.x MNIST hello-world
(``originals/``, see NOTICE.md), the data swapped for synthetic data of the same shapes
(``shim/``). Each runs on two CPU ranks with one of the two 1.x flag sets, trains for real
(one epoch of two batches), ends with a checkpoint, prints no traceback and leaves no process of
its session running; each run's effect is read back from what it wrote (the checkpoint's step,
the GAN's two optimizers, the CLI's saved config).

The porting section's changes are :data:`RULES`, applied by :func:`port`;
``test_the_porting_section_lists_exactly_the_changes_port_makes`` holds the section to them. A
default session runs four projects that between them use every 1.x API ddpkit adds, two each
way; the whole grid (every script, 1.2 and 1.4, both flag sets, both ways) runs with
``DDPKIT_ALL_PROJECTS=1``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")
pytest.importorskip("jsonargparse", reason="the `lightning` extra is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from fault_scripts.harness import session_pids

HERE = Path(__file__).resolve().parent
ORIGINALS = HERE / "originals"
SHIM = HERE / "shim"
PORTING = HERE.parents[2] / "docs" / "lightning.md"

#: The porting section's one rule (docs/lightning.md, "Porting a 1.x project"): sed's.
RULES: dict[str, tuple[str, str]] = {"sed": (r"pytorch_lightning", "ddpkit.lightning")}


def port(source: str, *, top_level_training: bool = False, rule: bool = True) -> str:
    """The porting section's changes, and only those: the rule (``rule=False``: the file stays
    as it is, for ``python -m ddpkit.lightning``), and (for a script that trains at its top
    level, run with spawn) the main guard."""
    if rule:
        for pattern, replacement in RULES.values():
            source = re.sub(pattern, replacement, source)
    return main_guarded(source) if top_level_training else source


def main_guarded(source: str) -> str:
    """Each run of top-level statements that are not imports, functions or classes, under
    ``if __name__ == "__main__":`` in its place."""
    out, run = [], []
    for node in ast.parse(source).body:
        text = ast.get_source_segment(source, node, padded=True) or ""
        if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef):
            if run:
                out.append('if __name__ == "__main__":\n' + textwrap.indent("\n".join(run), "    "))
                run = []
            out.append(text)
        else:
            run.append(text)
    if run:
        out.append('if __name__ == "__main__":\n' + textwrap.indent("\n".join(run), "    "))
    return "\n\n".join(out) + "\n"


def porting_table() -> list[tuple[str, str]]:
    """The (1.x line, ddpkit line) rows of the porting section's table."""
    text = PORTING.read_text()
    section = text.split("## Porting a 1.x project: what to change", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|$", section, flags=re.M)
    return [(old, new) for old, new in rows]


def test_the_porting_section_lists_exactly_the_changes_port_makes() -> None:
    rows = porting_table()
    assert rows, "docs/lightning.md has no porting table"
    for old, new in rows:
        assert port(old) == new, (old, port(old))
    section = PORTING.read_text().split("## Porting a 1.x project: what to change", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "sed -i 's/pytorch_lightning/ddpkit.lightning/g'" in section
    assert "python -m ddpkit.lightning train.py" in section
    assert 'if __name__ == "__main__":' in section


#: The two flag sets, as command-line arguments and as Trainer keywords.
FLAG_SETS = {
    "ddp_cpu": (["--accelerator", "ddp_cpu", "--num_processes", "2"],
                'accelerator="ddp_cpu", num_processes=2'),
    "unused_false": (["--num_processes", "2", "--plugins", "ddp_find_unused_parameters_false"],
                     'num_processes=2, plugins=["ddp_find_unused_parameters_false"]'),
}  # fmt: skip
LIMITS = ["--max_epochs", "1", "--limit_train_batches", "2", "--limit_val_batches", "2",
          "--limit_test_batches", "2"]  # fmt: skip

#: name → (release, script, how it takes the flags: argparse / cli / call, its own arguments)
PROJECTS: dict[str, tuple[str, str, str, list[str]]] = {
    "simple_image_classifier-1.2": ("1.2.0", "basic_examples/simple_image_classifier.py",
                                    "argparse", ["--num_workers", "0", "--batch_size", "8"]),
    "simple_image_classifier-1.4": ("1.4.0", "basic_examples/simple_image_classifier.py", "cli",
                                    ["--data.num_workers", "0", "--data.batch_size", "8"]),
    "autoencoder-1.2": ("1.2.0", "basic_examples/autoencoder.py", "argparse",
                        ["--batch_size", "8"]),
    "autoencoder-1.4": ("1.4.0", "basic_examples/autoencoder.py", "cli",
                        ["--data.batch_size", "8", "--trainer.limit_predict_batches", "2"]),
    "generative_adversarial_net-1.2": ("1.2.0", "domain_templates/generative_adversarial_net.py",
                                       "argparse", ["--num_workers", "0", "--batch_size", "8"]),
    "generative_adversarial_net-1.4": ("1.4.0", "domain_templates/generative_adversarial_net.py",
                                       "argparse", ["--num_workers", "0", "--batch_size", "8"]),
    "imagenet-1.2": ("1.2.0", "domain_templates/imagenet.py", "argparse",
                     ["--data-path", "imagenet", "-j", "0", "-b", "4"]),
    "imagenet-1.4": ("1.4.0", "domain_templates/imagenet.py", "argparse",
                     ["--data-path", "imagenet", "-j", "0", "-b", "4"]),
    "bug_report_model-1.2": ("1.2.0", "bug_report_model.py", "call", []),
    "bug_report_model-1.4": ("1.4.0", "bug_report_model.py", "call", []),
    "mnist_hello_world": ("tutorials", "mnist_hello_world.py", "call", []),
}  # fmt: skip
#: The runs of a default session, each flag set twice: the argparse API with 1.x's two-optimizer
#: automatic optimization under spawn; 1.4's LightningCLI (fit in its constructor) on DDPPlugin;
#: the hello-world (training at the top level, 1.x metrics, two Trainers, a second fit); the
#: argparse API with a script's own short options, under spawn. (A second fit under spawn:
#: test_second_fit.py; 1.x hooks: test_hooks.py.)
#: Two of them ported by the rule, two unchanged through ``python -m ddpkit.lightning``.
CHOSEN = {
    ("generative_adversarial_net-1.2", "ddp_cpu", "sed"),
    ("simple_image_classifier-1.4", "unused_false", "runner"),
    ("mnist_hello_world", "unused_false", "sed"),
    ("imagenet-1.4", "ddp_cpu", "runner"),
}
#: How the project runs: ported by the rule (``python script.py``), or unchanged (``python -m
#: ddpkit.lightning script.py``).
MODES = ("sed", "runner")
GRID = [(p, f, m) for p in sorted(PROJECTS) for f in sorted(FLAG_SETS) for m in MODES]

#: The runs that stop as they stopped on Lightning 1.x itself, with that flag set: (the error
#: they end with, whether the fit before it wrote its checkpoint).
AS_IN_1X = {
    # 1.4's prediction loop returns nothing under DDPSpawnPlugin (return_predictions is False
    # for spawn, in 1.4 as in 2.x), and the script prints predictions[0] after fit and test.
    ("autoencoder-1.4", "ddp_cpu"): ("TypeError: 'NoneType' object is not subscriptable", True),
    # 1.2's DDPSpawnPlugin pickles the model into every rank (mp.spawn), and the script defines
    # its model class inside a function: refused before any rank starts, naming strategy='ddp'.
    ("bug_report_model-1.2", "ddp_cpu"): ("Can't pickle local object 'test_run.<locals>", False),
}


def _with_flags(text: str, flag_set: str, hello: bool) -> str:
    """A script without a command line gets the flag set in its own ``Trainer(...)`` calls; the
    hello-world's three epochs of 55 000 images on a GPU become one epoch of two batches."""
    keywords = FLAG_SETS[flag_set][1]
    if hello:
        limits = "max_epochs=1, limit_train_batches=2, limit_val_batches=2, limit_test_batches=2"
        return text.replace("gpus=1, max_epochs=3", f"{keywords}, {limits}")
    return re.sub(r"\bTrainer\(", f"Trainer({keywords}, ", text)


def _prepare(tmp_path: Path, release: str, flag_set: str, kind: str, mode: str) -> Path:
    """The project as a 1.x user has it, the porting section's changes applied; returns the
    folder to import it from (``pl_examples`` lies in it)."""
    root = tmp_path / "project"
    shutil.copytree(ORIGINALS / release, root)
    for path in root.rglob("*.py"):
        text = path.read_text()
        hello = path.name == "mnist_hello_world.py"
        if kind == "call":
            text = _with_flags(text, flag_set, hello)
        path.write_text(port(text, top_level_training=hello, rule=mode == "sed"))
    package = root / "pl_examples"
    if package.is_dir():
        shutil.copy(SHIM / "pl_examples_init.py", package / "__init__.py")
        for sub in ("basic_examples", "domain_templates"):
            (package / sub / "__init__.py").write_text("")
    return root


def _arguments(kind: str, flag_set: str, own: list[str]) -> list[str]:
    if kind == "call":
        return []
    flags, limits = FLAG_SETS[flag_set][0], LIMITS
    if kind == "cli":
        flags = [f"--trainer.{a[2:]}" if a.startswith("--") else a for a in flags]
        limits = [f"--trainer.{a[2:]}" if a.startswith("--") else a for a in limits]
    return [*flags, *limits, *own]


def _run(
    path: Path, arguments: list[str], root: Path, work: Path, mode: str
) -> tuple[int, str, list[int]]:
    """The script in a session of its own: (exit status, stderr, processes of it left)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(SHIM)])}
    env.pop("PL_USE_MOCKED_MNIST", None)
    proc = subprocess.Popen(
        [sys.executable, *(["-m", "ddpkit.lightning"] if mode == "runner" else []), str(path),
         *arguments], cwd=work, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _, err = proc.communicate(timeout=200)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, err, session_pids(proc.pid)


def _check_effects(project: str, kind: str, work: Path) -> None:
    """What the run wrote: checkpoints of one epoch of the limited batches; the GAN's two
    optimizers each stepped on every batch; the CLI saved the 1.x keywords it was given."""
    checkpoints = sorted(work.rglob("*.ckpt"))
    assert checkpoints, f"no checkpoint in {sorted(work.rglob('*'))}"
    steps = 1 if project.startswith("bug_report_model") else 2
    for path in checkpoints:
        saved = torch.load(path, map_location="cpu", weights_only=False)
        assert (saved["epoch"], saved["global_step"]) == (0, steps), path
        if project.startswith("generative_adversarial_net"):
            optimizers = saved["optimizer_states"]
            assert len(optimizers) == 2
            for optimizer in optimizers:  # Adam counts its steps per parameter
                assert {float(s["step"]) for s in optimizer["state"].values()} == {2.0}
    if kind == "cli":  # one per launch under spawn: the loggers start a version each time
        configs = sorted(work.rglob("config.yaml"))
        assert configs and all("num_processes: 2" in c.read_text() for c in configs), configs


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("project", "flag_set", "mode"), GRID, ids=["-".join(g) for g in GRID])
def test_a_1x_project_runs_ported_or_unchanged(
    project: str, flag_set: str, mode: str, tmp_path: Path
) -> None:
    if (project, flag_set, mode) not in CHOSEN and not os.environ.get("DDPKIT_ALL_PROJECTS"):
        pytest.skip("one of the whole grid's runs: DDPKIT_ALL_PROJECTS=1 runs them all")
    release, script, kind, own = PROJECTS[project]
    root = _prepare(tmp_path, release, flag_set, kind, mode)
    path = root / ("pl_examples" if (root / "pl_examples").is_dir() else "") / script
    work = tmp_path / "work"
    work.mkdir()
    status, err, left = _run(path, _arguments(kind, flag_set, own), root, work, mode)
    assert left == [], f"left running: {left}"
    if (project, flag_set) in AS_IN_1X:
        error, fitted = AS_IN_1X[project, flag_set]
        assert status == 1 and error in err, err[-6000:]
        assert bool(sorted(work.rglob("*.ckpt"))) == fitted
        return
    assert status == 0, f"stderr:\n{err[-6000:]}"
    assert "Traceback" not in err, err[-6000:]
    _check_effects(project, kind, work)
