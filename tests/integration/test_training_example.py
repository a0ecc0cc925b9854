"""The README's main job, ``examples/train.py`` (what ``scripts/main.sh`` runs): it really trains
on 2 CPU processes, streams one line per epoch while it trains, leaves a summary line per epoch
in a terminal and nothing of the bar in a log, and ends with the checkpoint and a picture. The
README's own command of it runs here (read from the README, which marks it run here), checked
against its transcript."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from types import ModuleType

import pytest

from ddpkit import DDPKitDeprecationWarning, Trainer
from ddpkit.core._saving import load_checkpoint
from ddpkit.trainer._lightning_loops import read_position

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "docs"))
from doc_blocks import Command, assert_transcript, console_commands  # noqa: E402

EXAMPLE = REPO / "examples" / "train.py"
README = REPO / "README.md"
EPOCH_LINE = re.compile(
    r"^epoch (\d+) \(step (\d+), [0-9.]+ s\): train_acc=([0-9.]+)  train_loss=([0-9.]+)  "
    r"val_acc=([0-9.]+)  val_loss=([0-9.]+)$",
    re.M,
)


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spirals_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(tmp_path: Path, *args: str, merged: bool = False) -> subprocess.CompletedProcess[str]:
    """``merged``: stderr into stdout, in order, as a terminal shows them."""
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        cwd=tmp_path,  # from anywhere: nothing depends on the working directory
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
        timeout=200,
        check=False,
    )


def _assert_picture(path: Path) -> None:
    """A PNG that decodes, of the size drawn, and not blank."""
    image = pytest.importorskip("matplotlib.image").imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 1000, image.shape
    assert image.std() > 0.05


def _readme_command() -> Command:
    """The README's run of the main job (its transcript, which the README marks run here)."""
    (command,) = console_commands(README, "python examples/train.py")
    return command


@pytest.mark.timeout(240)
def test_the_main_example_trains_on_two_processes(tmp_path: Path) -> None:
    """The README's command, as written, from a folder holding a previous run's metrics."""
    command = _readme_command()
    assert command.text == "python examples/train.py --epochs 2" and command.expected
    epochs, samples, batch = 2, 4096, 64  # its --epochs, and the defaults
    root = tmp_path / "runs" / "spirals"  # the default --root-dir
    root.mkdir(parents=True)
    (root / "metrics.csv").write_text("epoch,step,stale\n9,999,1.0\n")  # a previous run's
    done = _run(tmp_path, *command.text.split()[2:], merged=True)
    out = done.stdout
    assert done.returncode == 0, out
    assert_transcript(f"README.md:{command.line}", command.expected, out)
    assert "Traceback" not in out, out
    assert "%|" not in out, "a progress bar was drawn into a pipe"

    # The plan, once (rank 1 re-runs the script but prints nothing of its own).
    assert out.count("plan for Trainer(") == 1
    words = " ".join(out.split())  # long plan lines may be wrapped
    assert "plan for Trainer(accelerator='ddp_cpu', num_processes=2, plugins=[DDPPlugin(" in words
    assert re.search(r"launcher\s+subprocess", out)

    # One line per epoch, in order, with this run's steps (not a previous run's rows); the
    # metrics are averaged over the ranks and the training loss goes down.
    steps_per_epoch = samples // 2 // batch
    lines = EPOCH_LINE.findall(out)
    assert [(int(e), int(s)) for e, s, *_ in lines] == [
        (e, (e + 1) * steps_per_epoch) for e in range(epochs)
    ]
    losses = [float(line[3]) for line in lines]
    assert losses[-1] < losses[0]
    assert "(step 999" not in out

    steps = epochs * steps_per_epoch
    tail = out.strip().splitlines()[-4:]
    picture = root.resolve() / "spirals.png"
    checkpoint = root.resolve() / "checkpoints" / f"epoch={epochs - 1}-step={steps}.ckpt"
    # The picture (drawn at on_fit_end), then the Trainer's summary of the fit.
    assert tail[0] == f"picture: {picture}"
    assert tail[1].startswith(f"done: {epochs} epochs, {steps} steps on 2 processes in ")
    assert tail[2] == f"checkpoint: {checkpoint}"
    assert tail[3] == f"logs: {root.resolve() / 'metrics.csv'}"
    _assert_picture(picture)
    saved = load_checkpoint(checkpoint)
    # Lightning's meaning: written by the last epoch (0-based), which a resume continues after.
    assert (saved["epoch"], saved["global_step"]) == (epochs - 1, steps)
    assert read_position(saved)["epochs_completed"] == epochs
    # Everything went under --root-dir; this run's metrics are its own file, and the stale
    # run's were set aside, not lost.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    assert sorted(p.name for p in root.iterdir()) == [
        "checkpoints",
        "metrics-v1.csv",
        "metrics.csv",
        "spirals.png",
    ]
    assert "stale" not in (root / "metrics.csv").read_text()
    assert "stale" in (root / "metrics-v1.csv").read_text()


@pytest.mark.timeout(120)
def test_each_epoch_line_is_printed_before_fit_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fit = Trainer.fit

    def fit_then_say_so(self: Trainer, *args: object, **kwargs: object) -> None:
        fit(self, *args, **kwargs)  # type: ignore[arg-type]
        print("<fit returned>", flush=True)

    monkeypatch.setattr(Trainer, "fit", fit_then_say_so)
    for name in ("DDPKIT_SEED", "PL_GLOBAL_SEED", "PL_SEED_WORKERS"):
        monkeypatch.setenv(name, "7")  # seed_everything exports them; undone after the test
    example = _example()
    example.main(["--variant=single", "--epochs=2", "--samples=1024", "--batch-size=16",
                  f"--root-dir={tmp_path}"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    returned = lines.index("<fit returned>")
    epochs = [i for i, line in enumerate(lines) if EPOCH_LINE.match(line)]
    assert len(epochs) == 2 and epochs[-1] < returned, lines
    picture = next(i for i, line in enumerate(lines) if line.startswith("picture: "))
    assert picture < returned  # rank 0 draws at the end of fit, where it holds the model
    # fit's own summary ends fit
    assert [line.split(":")[0] for line in lines[returned - 3 : returned]] == [
        "done", "checkpoint", "logs"
    ]  # fmt: skip


def _screen(raw: str) -> list[str]:
    """The lines a terminal shows after ``raw``: carriage returns, newlines, cursor up."""
    lines, row, col = [""], 0, 0
    for token in re.findall(r"\x1b\[A|\r\n|\r|\n|[^\r\n\x1b]+", raw):
        if token == "\x1b[A":
            row = max(row - 1, 0)
        elif token == "\r":
            col = 0
        elif token in ("\n", "\r\n"):
            row, col = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    return [line.rstrip() for line in lines if line.strip()]


@pytest.mark.timeout(120)
def test_in_a_terminal_the_bar_leaves_one_summary_line_per_epoch(tmp_path: Path) -> None:
    pytest.importorskip("tqdm")
    master, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 110, 0, 0))
    args = ["--variant=single", "--epochs=2", "--samples=1024", "--batch-size=16",
            f"--root-dir={tmp_path}"]  # fmt: skip
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), *args], stdin=child, stdout=child,
                            stderr=child, cwd=tmp_path)  # fmt: skip
    os.close(child)
    raw, deadline = b"", time.monotonic() + 100
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal's other side closed it
                    break
                if not chunk:
                    break
                raw += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        proc.kill() if proc.poll() is None else None
        proc.wait(timeout=10)
    assert proc.returncode == 0, raw.decode(errors="replace")
    screen = _screen(raw.decode())
    bars = [line for line in screen if re.match(r"epoch \d+: ", line)]
    assert len(bars) == 2, screen
    for epoch, line in enumerate(bars):
        assert line.startswith(f"epoch {epoch}: 100%") and "64/64" in line, line
        assert "train_loss_step=" in line
    # Each epoch: its bar's summary line only (the epoch lines are for logs); no validation or
    # sanity bar is left; the fit's summary at the end.
    order = [line.split(":")[0] for line in screen if line.startswith("epoch")]
    assert order == ["epoch 0", "epoch 1"]
    assert any(line.startswith("done: 2 epochs, 128 steps on 1 process in ") for line in screen)
    assert not any(line.startswith(("validate", "sanity check")) for line in screen), screen


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--epochs", "0"], "argument --epochs: '0' is not a whole number ≥ 1. Fix: for instance "
                            "--epochs 5"),
        (["--epochs", "-2"], "'-2' is not a whole number ≥ 1"),
        (["--batch-size", "x"], "argument --batch-size: 'x' is not a whole number ≥ 1"),
        (["--samples", "1.5"], "argument --samples: '1.5' is not a whole number ≥ 1"),
        (["--variant", "spwan"], "'spwan' is not a variant. Fix: did you mean --variant spawn?"),
        (["--variant", "zzz"], "'zzz' is not a variant. Fix: one of subprocess, spawn, legacy, "
                               "num_processes, modern, single"),
        (["--root-dir", "{file}"], "that is a file, not a folder. Fix: pass a folder"),
    ],
    ids=["epochs-0", "epochs-negative", "batch-size-text", "samples-float", "variant-typo",
         "variant-unknown", "root-dir-file"],
)  # fmt: skip
def test_edge_values_get_a_message_and_no_run(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    example = _example()
    with pytest.raises(SystemExit) as exit_:
        example.main([arg.replace("{file}", str(a_file)) for arg in args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing was written


#: the launcher of each variant (the README's table), and whether its plan says it is deprecated
LAUNCHERS = {
    "subprocess": ("subprocess", False),
    "spawn": ("spawn", False),
    "legacy": ("spawn", True),
    "num_processes": ("subprocess", False),
    "modern": ("subprocess", False),
    "single": ("none", False),
}


@pytest.mark.parametrize("variant", sorted(LAUNCHERS))
def test_each_variant_plans_the_launcher_the_readme_names(variant: str, tmp_path: Path) -> None:
    """In-process (building the Trainer, as main() does, starts nothing): with the runs below,
    it shows that a variant whose launcher another variant's run covers trains the same way."""
    example = _example()
    deprecated = LAUNCHERS[variant][1]
    with pytest.warns(DDPKitDeprecationWarning) if deprecated else contextlib.nullcontext():
        trainer = Trainer(**example.VARIANTS[variant](), max_epochs=1, default_root_dir=tmp_path)
    plan = trainer.accelerator_connector.plan
    assert plan.launcher.value == LAUNCHERS[variant][0]
    explained = trainer.accelerator_connector.explain()
    assert explained.count("  deprecated:") == (1 if deprecated else 0)
    assert sorted(example.VARIANTS) == sorted(LAUNCHERS)


#: subprocess DDP, as the main example's run (the default variant) above: their own spelling is
#: the plan the test above checks
SAME_LAUNCHER_AS_MAIN = pytest.mark.full_suite(
    "subprocess DDP, as test_the_main_example_trains_on_two_processes runs it; the variant's "
    "own plan is test_each_variant_plans_the_launcher_the_readme_names's"
)


@pytest.mark.timeout(200)
@pytest.mark.parametrize(
    "variant",
    [
        "spawn",
        "legacy",
        pytest.param("num_processes", marks=SAME_LAUNCHER_AS_MAIN),
        pytest.param("modern", marks=SAME_LAUNCHER_AS_MAIN),
        "single",
    ],
)
def test_every_variant_trains_and_draws(variant: str, tmp_path: Path) -> None:
    done = _run(tmp_path, f"--variant={variant}", "--epochs=1", "--samples=256", "--root-dir=r")
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert "Traceback" not in shown
    assert len(EPOCH_LINE.findall(done.stdout)) == 1
    assert f"picture: {(tmp_path / 'r' / 'spirals.png').resolve()}" in done.stdout
    assert re.search(r"^checkpoint: /.*\.ckpt$", done.stdout, re.M)
    _assert_picture(tmp_path / "r" / "spirals.png")
    processes = "1 process" if variant == "single" else "2 processes"
    assert f" on {processes} in " in done.stdout
    # A deprecation is said once: as a line of the plan (not again as a Python warning).
    assert done.stdout.count("  deprecated:") == (1 if variant == "legacy" else 0), shown
    assert "DDPKitDeprecationWarning" not in done.stderr
