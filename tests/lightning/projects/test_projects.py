"""Real Lightning 1.x projects run on ddpkit with only the changes docs/lightning.md's porting
section lists: Lightning's own ``pl_examples`` of 1.2.0 and 1.4.0 and the 1.x MNIST hello-world
(``originals/``, see NOTICE.md), the data swapped for synthetic data of the same shapes
(``shim/``). Each runs on two CPU ranks with one of the two 1.x flag sets, and must end with a
checkpoint, print no traceback and leave no process of its session running.

The porting section's changes are applied by :func:`port` — the docs test checks that the section
lists these rules and nothing else. A few runs cover both flag sets and every script; the whole
grid (every script with both flag sets) runs with ``DDPKIT_ALL_PROJECTS=1``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")
pytest.importorskip("jsonargparse", reason="the `lightning` extra is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from fault_scripts.harness import session_pids

HERE = Path(__file__).resolve().parent
ORIGINALS = HERE / "originals"
SHIM = HERE / "shim"

#: The names a 1.x script imports from ddpkit.lightning instead (docs/lightning.md, porting).
DDPKIT_NAMES = {"Trainer", "LightningDataModule", "LightningCLI", "DDPPlugin", "DDPSpawnPlugin"}
#: The 1.x modules those names were imported from.
_FROM = r"pytorch_lightning(?:\.core|\.trainer|\.utilities\.cli|\.plugins)?"


def port(source: str, *, top_level_training: bool = False) -> str:
    """The changes of docs/lightning.md's "Porting a 1.x project: what to change", and only
    those: the imports, and (for a script that trains at its top level, with spawn) the guard."""
    source = re.sub(r"^import pytorch_lightning as pl$", "import ddpkit.lightning as pl", source,
                    flags=re.M)  # fmt: skip
    source = re.sub(r"^from pytorch_lightning\.metrics(\.functional)? import",
                    r"from ddpkit.lightning.metrics\1 import", source, flags=re.M)  # fmt: skip

    def from_ddpkit(match: re.Match[str]) -> str:
        names = {n.split(" as ")[0].strip() for n in match.group(1).split(",")}
        return f"from ddpkit.lightning import {match.group(1)}" if names & DDPKIT_NAMES else (
            match.group(0))  # fmt: skip

    source = re.sub(rf"^from {_FROM} import (.+)$", from_ddpkit, source, flags=re.M)
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
#: The runs of a default session: every script once, both flag sets, the hardest twice.
CHOSEN = {
    ("simple_image_classifier-1.2", "ddp_cpu"), ("simple_image_classifier-1.4", "unused_false"),
    ("autoencoder-1.2", "unused_false"), ("autoencoder-1.4", "ddp_cpu"),
    ("generative_adversarial_net-1.4", "ddp_cpu"), ("generative_adversarial_net-1.2", "unused_false"),
    ("imagenet-1.4", "unused_false"), ("bug_report_model-1.2", "ddp_cpu"),
    ("mnist_hello_world", "ddp_cpu"),
}  # fmt: skip
GRID = [(p, f) for p in sorted(PROJECTS) for f in sorted(FLAG_SETS)]


#: What the hello-world's Trainer(...) calls get besides a flag set: it has no command line, and
#: three epochs of 55 000 images is not a test's time.
HELLO_LIMITS = "max_epochs=1, limit_train_batches=2, limit_val_batches=2, limit_test_batches=2"


def _prepare(tmp_path: Path, release: str, script: str, flag_set: str, kind: str) -> Path:
    """The project as a 1.x user has it, the porting section's changes applied; returns the
    folder to import it from (``pl_examples`` lies in it)."""
    root = tmp_path / "project"
    shutil.copytree(ORIGINALS / release, root)
    for path in root.rglob("*.py"):
        text = path.read_text()
        if kind == "call":  # the flag set, written into the script's own Trainer(...) calls
            hello = path.name == "mnist_hello_world.py"
            keywords = FLAG_SETS[flag_set][1] + (f", {HELLO_LIMITS}" if hello else "")
            text = re.sub(r"\bTrainer\(", f"Trainer({keywords}, ", text.replace("gpus=1, ", ""))
        path.write_text(port(text, top_level_training=path.name == "mnist_hello_world.py"))
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


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("project", "flag_set"), GRID, ids=[f"{p}-{f}" for p, f in GRID])
def test_a_1x_project_runs_with_only_its_imports_changed(
    project: str, flag_set: str, tmp_path: Path
) -> None:
    if (project, flag_set) not in CHOSEN and not os.environ.get("DDPKIT_ALL_PROJECTS"):
        pytest.skip("one of the whole grid's runs: DDPKIT_ALL_PROJECTS=1 runs them all")
    release, script, kind, own = PROJECTS[project]
    root = _prepare(tmp_path, release, script, flag_set, kind)
    path = root / ("pl_examples" if (root / "pl_examples").is_dir() else "") / script
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(SHIM)])}
    env.pop("PL_USE_MOCKED_MNIST", None)
    proc = subprocess.Popen(
        [sys.executable, str(path), *_arguments(kind, flag_set, own)],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=200)
    finally:
        left = session_pids(proc.pid)
    assert proc.returncode == 0, f"stdout:\n{out[-3000:]}\nstderr:\n{err[-6000:]}"
    assert "Traceback" not in err, err[-6000:]
    assert left == [], f"left running: {left}"
    checkpoints = sorted(work.rglob("*.ckpt"))
    assert checkpoints, f"no checkpoint in {sorted(work.rglob('*'))}"
