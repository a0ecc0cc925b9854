"""What rank zero shows while it trains: a progress bar in a terminal (tqdm, when installed),
one line per epoch in a log, and a summary when ``fit`` ends.

In a terminal, each training epoch's bar stays on screen when it ends, as that epoch's summary
line; evaluation bars (sanity check, validation, test, predict) are drawn below it while they run
and leave nothing behind. Written to a file or a pipe (a log, CI, ``nohup``), the bar draws
nothing (``\\r``-redrawn bars only make a log unreadable); instead each epoch, once its
validation and ``on_train_epoch_end`` hooks ran, prints one line on stdout::

    epoch 0 (step 32, 1.2 s): train_acc=0.5867  train_loss=0.7006  val_acc=0.5625  val_loss=0.6104

(its epoch-level metrics, as ``callback_metrics`` holds them, by name: a value logged per step
and per epoch shows its epoch mean under its own name; the time since the previous line, or
since ``fit`` began). When ``fit`` ends, a few lines say what it did,
where the checkpoint went and where the logs are::

    done: 2 epochs, 64 steps on 2 processes in 3.1 s
    checkpoint: /abs/runs/spirals/checkpoints/epoch=1-step=64.ckpt
    logs: /abs/runs/spirals/metrics.csv

``Trainer(enable_progress_bar=False)`` turns all of it off.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from ddpkit.trainer._protocols import LoopTrainer

#: Steps between two postfix updates: formatting the metrics costs more than a tiny step.
POSTFIX_EVERY = 20

#: Descriptions of the passes whose bar is transient (``start``'s ``leave`` decides otherwise).
TRANSIENT = frozenset({"sanity check", "validate", "test", "predict"})


def _interactive(stream: TextIO) -> bool:
    """A terminal, or a notebook (ipykernel's streams are not TTYs but show a bar well)."""
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return True
    ipython = sys.modules.get("IPython")  # imported (by nbclient, say) is not running in one
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


class ProgressBar:
    """``start(total, desc)`` opens a bar, ``update(metrics)`` advances it by one batch,
    ``close()`` ends the innermost open bar. A bar started while a kept bar is open (validation
    in the middle of an epoch) is drawn below it, and that bar goes on after it closes."""

    def __init__(
        self, enabled: bool, *, file: TextIO | None = None, log: TextIO | None = None
    ) -> None:
        self._file = file
        self._log = log
        self._bars: list[tuple[Any, bool]] = []  # (tqdm bar, leave), innermost last
        self._metrics: Callable[[], Mapping[str, float]] | None = None
        self._enabled = enabled and _interactive(self._stream())
        if self._enabled:
            try:
                import tqdm  # noqa: F401
            except ImportError:
                self._enabled = False
        #: the epoch lines: where no bar is drawn, or where stdout goes to a file or a pipe
        self._lines = enabled and (not self._enabled or not _interactive(self._log_stream()))
        #: the summary at the end of fit
        self._summary = enabled
        self._started = self._since = time.monotonic()

    def _log_stream(self) -> TextIO:
        return self._log if self._log is not None else sys.stdout

    def _say(self, lines: Sequence[str]) -> None:
        stream = self._log_stream()
        stream.write("".join(f"{line}\n" for line in lines))
        stream.flush()

    def epoch_end(self, epoch: int, step: int, metrics: Callable[[], Mapping[str, Any]]) -> None:
        """A training epoch ended (its validation and hooks included): its line, in a log."""
        if not self._lines:
            return
        now = time.monotonic()
        seconds, self._since = now - self._since, now
        self._say([epoch_line(epoch, step, seconds, metrics())])

    def fit_end(self, trainer: LoopTrainer) -> None:
        """``fit`` ended well: what it did, and where its checkpoint and logs went."""
        if self._summary:
            self._say(fit_summary(trainer, time.monotonic() - self._started))

    @property
    def enabled(self) -> bool:
        """False when there is nothing to draw (not rank zero, turned off, no tqdm, output not a
        terminal): the loop then skips :meth:`update` altogether."""
        return self._enabled

    def _stream(self) -> TextIO:
        # Looked up when used, not at import: pytest and notebooks replace sys.stderr.
        return self._file if self._file is not None else sys.stderr

    def start(self, total: int | None, desc: str, *, leave: bool | None = None) -> None:
        """Open a bar of ``total`` batches (``None``: unknown). ``leave``: keep its last state on
        screen as a summary line; by default training epochs are kept and the passes named in
        :data:`TRANSIENT` are not."""
        if not self._enabled:
            return
        from tqdm import tqdm

        keep = desc not in TRANSIENT if leave is None else leave
        # a kept bar closes every open bar; a transient one, the transient bars open
        while self._bars and (keep or not self._bars[-1][1]):
            self.close()
        bar = tqdm(
            total=total,
            desc=desc,
            leave=keep,
            position=len(self._bars),
            file=self._stream(),
            dynamic_ncols=True,
        )
        self._bars.append((bar, keep))

    def update(self, metrics: Callable[[], Mapping[str, float]]) -> None:
        """One more batch. ``metrics`` is called (and its values converted to floats, which
        waits for the device) only on the steps that update the postfix, and once more when a
        kept bar closes, so that its summary line shows the epoch's last values."""
        if not self._bars:
            return
        bar, keep = self._bars[-1]
        bar.update(1)
        if not keep:
            return  # an evaluation's bar counts batches only, as Lightning's does
        self._metrics = metrics
        if bar.n % POSTFIX_EVERY == 0:
            self._postfix(bar, metrics)

    def close(self) -> None:
        """End the innermost open bar (nothing when none is open)."""
        if not self._bars:
            return
        bar, keep = self._bars.pop()
        if keep and self._metrics is not None:
            self._postfix(bar, self._metrics)
            self._metrics = None
        bar.close()

    @staticmethod
    def _postfix(bar: Any, metrics: Callable[[], Mapping[str, float]]) -> None:
        values = metrics()
        if values:
            bar.set_postfix({k: f"{v:.4g}" for k, v in values.items()}, refresh=False)


def _number(value: float) -> str:
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.4f}"
    return f"{value:.4g}"


def epoch_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The epoch-level values of ``callback_metrics``: ``x_epoch`` shown as ``x``, and the
    ``x_step`` of the same value left out; sorted by name, so that a log's lines line up (and
    ``train_*`` comes before ``val_*``)."""
    shown: dict[str, float] = {}
    for name, value in sorted(metrics.items()):
        base = name.removesuffix("_step")
        if base != name and f"{base}_epoch" in metrics:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        shown[name.removesuffix("_epoch") if name.endswith("_epoch") else name] = number
    return shown


def epoch_line(epoch: int, step: int, seconds: float, metrics: Mapping[str, Any]) -> str:
    """``epoch 0 (step 32, 1.2 s): train_loss=0.7006  val_loss=0.6104``."""
    values = "  ".join(f"{k}={_number(v)}" for k, v in epoch_metrics(metrics).items())
    head = f"epoch {epoch} (step {step}, {seconds:.1f} s)"
    return f"{head}: {values}" if values else head


def fit_summary(trainer: LoopTrainer, seconds: float) -> list[str]:
    """The lines that end ``fit``: epochs, steps, processes and time; the checkpoint (the best
    one, with its score, when it monitors a metric); the logs."""
    processes = "1 process" if trainer.world_size == 1 else f"{trainer.world_size} processes"
    epochs = trainer.current_epoch
    lines = [
        f"done: {epochs} epoch{'s' if epochs != 1 else ''}, {trainer.global_step} steps on "
        f"{processes} in {seconds:.1f} s"
    ]
    callback = trainer.checkpoint_callback
    if callback is not None:
        monitor = getattr(callback, "monitor", None)
        best = getattr(callback, "best_model_path", "")
        score = getattr(callback, "best_model_score", None)
        if monitor and best:
            at = f" ({monitor}={_number(float(score))})" if score is not None else ""
            lines.append(f"best checkpoint: {os.path.abspath(best)}{at}")
        elif trainer.checkpoint_path:
            lines.append(f"checkpoint: {os.path.abspath(trainer.checkpoint_path)}")
    for logger in trainer.loggers:
        where = getattr(logger, "log_dir", None) or getattr(logger, "save_dir", None)
        if where:
            csv = os.path.join(where, "metrics.csv")
            lines.append(f"logs: {os.path.abspath(csv if os.path.isfile(csv) else where)}")
    return lines
