"""The progress bar (real tqdm): one summary line per training epoch left in a terminal, nothing
left by the evaluation passes, nothing of the bar written to a file or a pipe; there, one line
per epoch instead, and the summary of fit."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import torch
from terminal import Terminal
from trainer_models import Recorder, loader

from ddpkit import Trainer
from ddpkit.callbacks import ModelCheckpoint
from ddpkit.trainer._progress import ProgressBar

pytest.importorskip("tqdm")


def _epoch(bar: ProgressBar, epoch: int, batches: int, validate_at: int | None = None) -> None:
    bar.start(batches, f"epoch {epoch}")
    for i in range(batches):
        bar.update(lambda i=i: {"train_loss": 1.0 / (epoch * batches + i + 1)})
        if i == validate_at:  # validation in the middle of the epoch (val_check_interval)
            bar.start(3, "validate")
            for _ in range(3):
                bar.update(lambda: {"val_loss": 9.0})
            bar.close()
    bar.close()
    bar.start(3, "validate")  # the epoch's own validation
    for _ in range(3):
        bar.update(dict)
    bar.close()


def test_each_training_epoch_leaves_one_summary_line() -> None:
    terminal = Terminal()
    bar = ProgressBar(True, file=terminal)
    assert bar.enabled
    bar.start(2, "sanity check")
    bar.update(dict)
    bar.update(dict)
    bar.close()
    _epoch(bar, 0, 30)
    _epoch(bar, 1, 30, validate_at=10)
    screen = terminal.screen()
    assert len(screen) == 2, screen
    for epoch, line in enumerate(screen):
        assert line.startswith(f"epoch {epoch}: 100%"), line
        assert "30/30" in line
    # The summary shows the epoch's last values, not those of the last 20-step postfix update.
    # (step 20's postfix said 0.05 and 0.02439)
    assert screen[0].endswith("train_loss=0.03333]")
    assert screen[1].endswith("train_loss=0.01667]")
    assert "val" not in "".join(screen)


def test_a_file_or_a_pipe_gets_nothing() -> None:
    log = io.StringIO()  # isatty() is False, as for a log file or CI's pipe
    bar = ProgressBar(True, file=log)
    assert not bar.enabled
    _epoch(bar, 0, 5)
    assert log.getvalue() == ""


def test_turned_off_it_draws_nothing_even_in_a_terminal() -> None:
    terminal = Terminal()
    bar = ProgressBar(False, file=terminal)
    assert not bar.enabled
    _epoch(bar, 0, 5)
    assert terminal.getvalue() == ""


def test_leave_overrides_the_default() -> None:
    terminal = Terminal()
    bar = ProgressBar(True, file=terminal)
    bar.start(2, "test", leave=True)
    bar.update(dict)
    bar.update(dict)
    bar.close()
    bar.start(2, "epoch 0", leave=False)
    bar.update(dict)
    bar.close()
    assert [line.split(":")[0] for line in terminal.screen()] == ["test"]


def test_close_without_a_bar_and_update_after_close_do_nothing() -> None:
    terminal = Terminal()
    bar = ProgressBar(True, file=terminal)
    bar.close()
    bar.update(dict)
    assert terminal.getvalue() == ""


# -- in a log: one line per epoch, and the summary of fit -----------------------------------


def test_a_log_gets_one_line_per_epoch_with_its_epoch_values() -> None:
    terminal, log = Terminal(), io.StringIO()
    bar = ProgressBar(True, file=terminal, log=log)  # stderr a terminal, stdout a log: lines
    metrics = {
        "train_loss_step": torch.tensor(0.9),
        "train_loss_epoch": torch.tensor(0.5),
        "train_loss": torch.tensor(0.5),
        "val_acc": torch.tensor(0.91234),
        "lr": 3e-5,
    }
    bar.epoch_end(0, 32, lambda: metrics)
    bar.epoch_end(1, 64, dict)
    lines = log.getvalue().splitlines()
    assert re.fullmatch(
        r"epoch 0 \(step 32, \d+\.\d s\): lr=3e-05  train_loss=0\.5000  val_acc=0\.9123", lines[0]
    ), lines
    assert re.fullmatch(r"epoch 1 \(step 64, \d+\.\d s\)", lines[1]), lines


def test_in_a_terminal_the_bar_is_the_epoch_line() -> None:
    terminal = Terminal()
    bar = ProgressBar(True, file=terminal, log=terminal)
    _epoch(bar, 0, 3)
    bar.epoch_end(0, 3, lambda: {"loss": 1.0})
    assert [line.split(":")[0] for line in terminal.screen()] == ["epoch 0"]


def test_turned_off_a_log_gets_nothing() -> None:
    log = io.StringIO()
    bar = ProgressBar(False, file=log, log=log)
    bar.epoch_end(0, 3, lambda: {"loss": 1.0})
    bar.fit_end(object())  # never read
    assert log.getvalue() == ""


@pytest.mark.parametrize("shown", [True, False])
def test_fit_ends_with_its_summary_in_a_log(
    shown: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = ModelCheckpoint(monitor="val_loss", mode="min")
    trainer = Trainer(
        max_epochs=2, default_root_dir=tmp_path, callbacks=[checkpoint],
        enable_model_summary=False, enable_progress_bar=shown, log_every_n_steps=1,
    )  # fmt: skip
    trainer.fit(Recorder(), loader(16), loader(8))
    out = capsys.readouterr().out.splitlines()  # captured: not a terminal
    if not shown:
        assert out == []
        return
    assert [line.split(" (")[0] for line in out[:2]] == ["epoch 0", "epoch 1"]
    assert "val_loss=" in out[0] and "train_loss=" in out[0]
    assert re.fullmatch(r"done: 2 epochs, 8 steps on 1 process in \d+\.\d s", out[2]), out
    score = float(checkpoint.best_model_score)
    assert out[3] == (
        f"best checkpoint: {Path(checkpoint.best_model_path).resolve()} (val_loss={score:.4f})"
    )
    assert out[4] == f"logs: {(tmp_path / 'metrics.csv').resolve()}"
    assert len(out) == 5
