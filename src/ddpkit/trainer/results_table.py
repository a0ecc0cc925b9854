"""The table ``trainer.validate()`` and ``trainer.test()`` print (``verbose=True``), in
Lightning's plain layout (``pytorch_lightning.loops.evaluation_loop._print_results`` without
rich): a rule, ``Test metric`` and ``DataLoader 0`` centred in columns, a rule, one row a
metric in name order, a rule."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["format_results", "print_results"]


def _bar_character() -> str:
    encoding = sys.stdout.encoding
    try:
        if encoding is not None:
            "─".encode(encoding)
    except UnicodeEncodeError:
        return "-"
    return "─"


def format_results(results: Sequence[Mapping[str, Any]], stage: str) -> str | None:
    """The table's lines for ``results`` (one dict a loader), or None with nothing to show."""
    names = sorted({name for result in results for name in result})
    if not names:
        return None
    headers = [f"DataLoader {i}" for i in range(len(results))]
    term_size = shutil.get_terminal_size(fallback=(120, 30)).columns or 120
    width = int(min(max(len(max(names, key=len)), len(max(headers, key=len)), 25), term_size / 2))
    rows = [[f"{result[name]}" if name in result else " " for result in results] for name in names]
    columns = max(1, int((term_size - width) / width))
    bar = _bar_character() * term_size
    half = int(term_size / 2)
    lines: list[str] = []
    for start in range(0, len(headers), columns):
        table_headers = [f"{stage} Metric".capitalize(), *headers[start : start + columns]]
        row_format = f"{{:^{width}}}" * len(table_headers)
        lines += [bar, row_format.format(*table_headers).rstrip(), bar]
        for name, row in zip(names, rows, strict=True):
            cells = row[start : start + columns]
            if len(name) <= half:
                lines.append(row_format.format(name, *cells).rstrip())
                continue
            metric = name  # a long name wraps over several lines, as Lightning wraps it
            while len(metric) > half:
                lines.append(row_format.format(metric[:half], *cells).rstrip())
                metric = metric[half:]
            lines.append(row_format.format(metric, *[" "] * len(cells)).rstrip())
        lines.append(bar)
    return os.linesep.join(lines)


def print_results(results: Sequence[Mapping[str, Any]], stage: str) -> None:
    text = format_results(results, stage)
    if text is not None:
        print(text)
