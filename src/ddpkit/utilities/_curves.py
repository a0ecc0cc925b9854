"""A run's ``metrics.csv`` drawn as curves: one panel per metric, against the optimizer step.

What ``ddpkit plot`` runs. It reads the CSV that ddpkit's Trainer writes into
``default_root_dir`` (and the one Lightning's ``CSVLogger`` writes: the same columns). Reading
needs only the standard library; drawing imports matplotlib (``pip install 'ddpkit[plot]'``)
when called, so that ``import ddpkit`` never does.
"""

from __future__ import annotations

import csv
import math
import os
import re
from pathlib import Path

from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._files import atomic_write

#: Columns that say where a row was logged, not what.
_POSITION = ("epoch", "step")
#: What a value logged both per step and per epoch is stored as: ``<name>_step``, ``<name>_epoch``.
_SUFFIXES = ("_step", "_epoch")
#: The stage a metric belongs to, as people name it: ``train_loss``, ``val/loss`` ...
_STAGE = re.compile(r"^(train|training|val|valid|validation|test)[_/]")

Series = dict[str, list[tuple[float, float]]]


def read_metrics(path: str | os.PathLike[str]) -> Series:
    """``{column: [(step, value), ...]}`` for every metric column with at least one number.
    Rows without a ``step`` column are numbered from 0."""
    source = Path(path)
    if source.is_dir():
        raise MisconfigurationError(
            f"{source} is a folder. Fix: pass the CSV in it, {source / 'metrics.csv'}"
        )
    if not source.is_file():
        raise MisconfigurationError(
            f"{source}: no such file. Fix: pass the metrics.csv of a run: the Trainer writes "
            f"it into its default_root_dir (examples/train.py: runs/spirals/metrics.csv)"
        )
    try:
        with source.open(newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            header = [name for name in reader.fieldnames or () if name]
    except (UnicodeDecodeError, csv.Error) as err:
        raise MisconfigurationError(
            f"{source} is not a CSV file ({err}). Fix: pass the metrics.csv of a run"
        ) from err
    series: Series = {}
    for index, row in enumerate(rows):
        x = _number(row.get("step"))
        x = float(index) if x is None else x
        for column, text in row.items():
            if column is None or column in _POSITION or not isinstance(text, str):
                continue  # a row longer than the header has its extra cells under None
            value = _number(text)
            if value is not None:
                series.setdefault(column, []).append((x, value))
    if not series:
        columns = ", ".join(header) or "none"
        raise MisconfigurationError(
            f"{source} holds no metric values (columns: {columns}). Fix: log metrics with "
            f"self.log(...) in the module, and keep Trainer(logger=True)"
        )
    return series


def _number(text: str | None) -> float | None:
    if text is None or not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        return None


def default_output(path: str | os.PathLike[str]) -> Path:
    """Where the picture goes when no output is given: beside the CSV, ``metrics.png``."""
    return Path(path).with_suffix(".png")


def _panels(series: Series) -> dict[str, list[str]]:
    """Columns grouped by what they measure: ``train_loss_step``, ``train_loss_epoch`` and
    ``val_loss`` share the panel "loss". Losses first, then the rest by name."""
    panels: dict[str, list[str]] = {}
    for column in series:
        base = _STAGE.sub("", column) or column
        for suffix in _SUFFIXES:
            base = base.removesuffix(suffix)
        panels.setdefault(base, []).append(column)
    order = sorted(panels, key=lambda name: ("loss" not in name, name))
    return {name: sorted(panels[name]) for name in order}


def plot_metrics(
    path: str | os.PathLike[str], output: str | os.PathLike[str] | None = None
) -> Path:
    """Draw the CSV at ``path`` into ``output`` (default: :func:`default_output`; a folder gets
    ``metrics.png`` inside it); the format follows the suffix (png, pdf, svg ...; none: png).
    The file is written atomically. Returns where it went."""
    series = read_metrics(path)
    target = Path(output) if output is not None else default_output(path)
    if target.is_dir() or str(output).endswith(("/", os.sep)):
        target = target / default_output(path).name
    elif not target.suffix:
        target = target.with_suffix(".png")
    try:
        from matplotlib.figure import Figure  # no pyplot: no window, no global state
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "drawing metrics needs matplotlib, which is not installed. "
            "Fix: pip install 'ddpkit[plot]' (or pip install matplotlib)",
            name="matplotlib",
        ) from err
    panels = _panels(series)
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(4.6 * ncols, 3.4 * nrows), layout="constrained")
    formats = fig.canvas.get_supported_filetypes()
    kind = target.suffix.lstrip(".").lower()
    if kind not in formats:
        raise MisconfigurationError(
            f"{target}: matplotlib cannot write {kind!r} files. Fix: end the name with one of "
            f"{', '.join('.' + k for k in sorted(formats))}, for instance {target.stem}.png"
        )
    axes = fig.subplots(nrows, ncols, squeeze=False).flatten()
    for ax, (name, columns) in zip(axes, panels.items()):
        for column in columns:
            xs, ys = zip(*series[column])
            # Per-step values are many and noisy; per-epoch ones are few and matter more.
            step = column.endswith("_step")
            style = {"linewidth": 0.8, "alpha": 0.6} if step else {"marker": "o"}
            ax.plot(xs, ys, label=column, **style)
        ax.set(title=name, xlabel="step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(str(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(target, lambda fh: fig.savefig(fh, format=kind, dpi=100))
