"""``ModelSummary``: the table of layers and parameter counts printed when ``fit`` starts."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from torch import nn

from ddpkit.callbacks._base import Callback
from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._reprs import safe_repr

if TYPE_CHECKING:
    from ddpkit.core._protocols import CallbackTrainer


def _count(n: int) -> str:
    for unit, size in (("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return str(n)


def summarize(model: nn.Module, max_depth: int = 1) -> str:
    """Lightning's table: name, type, parameters and mode of every submodule down to
    ``max_depth`` (-1: all), then the trainable / total counts and the size in MB."""
    rows: list[tuple[str, str, str, str]] = []
    for name, module in model.named_modules():
        depth = name.count(".") + 1
        if not name or (max_depth != -1 and depth > max_depth):
            continue
        params = sum(p.numel() for p in module.parameters())
        mode = "train" if module.training else "eval"
        rows.append((name, type(module).__name__, _count(params), mode))
    header = ("", "Name", "Type", "Params", "Mode")
    table = [header] + [(str(i), *row) for i, row in enumerate(rows)]
    widths = [max(len(r[c]) for r in table) for c in range(len(header))]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]
    rule = "-" * max(len(line) for line in lines)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    size_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 1e6
    footer = [
        f"{_count(trainable):<10} Trainable params",
        f"{_count(total - trainable):<10} Non-trainable params",
        f"{_count(total):<10} Total params",
        f"{size_mb:<10.3f} Total estimated model params size (MB)",
    ]
    return "\n".join([rule, lines[0], rule, *lines[1:], rule, *footer])


class ModelSummary(Callback):
    """Print :func:`summarize` on global rank zero when ``fit`` starts (to stderr, as Lightning's
    log does). ``Trainer(enable_model_summary=False)`` leaves it out."""

    def __init__(self, max_depth: int = 1) -> None:
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < -1:
            raise MisconfigurationError(
                f"ModelSummary(max_depth={safe_repr(max_depth)}): pass -1 (every layer), 0 (no "
                "table) or a depth ≥ 1. Fix: max_depth=1."
            )
        self._max_depth = max_depth

    def on_fit_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if self._max_depth == 0 or not trainer.is_global_zero:
            return
        print(summarize(pl_module, self._max_depth), file=sys.stderr, flush=True)
