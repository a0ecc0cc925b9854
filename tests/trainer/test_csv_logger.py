"""The default metrics log."""

from __future__ import annotations

import csv
from pathlib import Path

from ddpkit.trainer.csv_logger import CSVLogger


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_columns_grow_as_metrics_appear(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path / "logs")
    logger.log({"epoch": 0, "step": 1, "loss": 0.5})
    logger.log({"epoch": 0, "step": 1, "val_loss": 0.25})
    logger.flush()
    path = tmp_path / "logs" / "metrics.csv"
    assert path.read_text().splitlines()[0] == "epoch,step,loss,val_loss"
    assert rows(path) == [
        {"epoch": "0", "step": "1", "loss": "0.5", "val_loss": ""},
        {"epoch": "0", "step": "1", "loss": "", "val_loss": "0.25"},
    ]
    logger.log({"epoch": 1, "step": 2, "loss": 0.4})
    logger.flush()
    assert len(rows(path)) == 3
    assert sorted(p.name for p in path.parent.iterdir()) == ["metrics.csv"]  # no temporary


def test_nothing_logged_writes_nothing(tmp_path: Path) -> None:
    CSVLogger(tmp_path).flush()
    assert list(tmp_path.iterdir()) == []


def test_the_row_given_is_copied(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path, filename="m.csv")
    row: dict[str, float | int] = {"epoch": 0, "step": 0, "loss": 1.0}
    logger.log(row)
    row["loss"] = 2.0
    logger.flush()
    assert rows(tmp_path / "m.csv")[0]["loss"] == "1.0"
