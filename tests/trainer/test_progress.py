"""The progress bar (real tqdm): one summary line per training epoch left in a terminal, nothing
left by the evaluation passes, nothing at all written to a file or a pipe."""

from __future__ import annotations

import io

import pytest
from terminal import Terminal

from ddpkit.trainer.progress import ProgressBar

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
