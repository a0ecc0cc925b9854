"""The default metrics log: ``<default_root_dir>/metrics.csv``, written by rank zero."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

__all__ = ["CSVLogger"]


class CSVLogger:
    """Rows of (epoch, step, metric...) ; columns grow as new metrics appear. The file is
    rewritten atomically at every flush (small files; never half-written)."""

    def __init__(self, root: str | os.PathLike[str], filename: str = "metrics.csv") -> None:
        self.path = Path(root) / filename
        self.rows: list[dict[str, float | int]] = []

    def log(self, row: dict[str, float | int]) -> None:
        self.rows.append(dict(row))

    def flush(self) -> None:
        if not self.rows:
            return
        columns = ["epoch", "step"]
        for row in self.rows:
            columns += [k for k in row if k not in columns]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(self.rows)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(buf.getvalue())
        os.replace(tmp, self.path)
