"""A run's metrics are data: a resumed fit continues the file, a later run never replaces it;
``save()`` leaves the version folder (as Lightning's does); and every bad argument of a logger is
refused when it is built, naming the call and the fix."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from test_loggers import Logged, data

from ddpkit import MisconfigurationError, Trainer
from ddpkit.loggers import CSVLogger, TensorBoardLogger


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def trainer(root: Path, epochs: int, **kwargs: Any) -> Trainer:
    return Trainer(
        default_root_dir=root,
        max_epochs=epochs,
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        **kwargs,
    )


@pytest.mark.filterwarnings("ignore:ModelCheckpoint. the checkpoint directory")
def test_a_resumed_fit_continues_the_default_log(tmp_path: Path) -> None:
    """Before, the resumed fit's writer replaced metrics.csv: the first run's rows were lost."""
    first = trainer(tmp_path, 1)
    first.fit(Logged(), data(), data())
    before = rows(tmp_path / "metrics.csv")
    assert [int(r["step"]) for r in before if r["train_loss"]] == [0, 1, 2, 3]
    resumed = trainer(tmp_path, 2)
    resumed.fit(Logged(), data(), data(), ckpt_path=first.checkpoint_callback.last_model_path
                or first.checkpoint_callback.best_model_path)  # fmt: skip
    after = rows(tmp_path / "metrics.csv")
    assert after[: len(before)] == before  # the first run's rows, untouched
    assert [int(r["step"]) for r in after if r["train_loss"]] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert [r["epoch"] for r in after if r["val_loss"]] == ["0", "1"]


@pytest.mark.filterwarnings("ignore:ModelCheckpoint. the checkpoint directory")
def test_a_new_run_in_a_fixed_folder_keeps_the_earlier_runs_file(tmp_path: Path) -> None:
    """Lightning deletes it; ddpkit sets it aside (metrics-v1.csv) and starts its own, and a
    later stage of the run (test) adds to this run's file."""
    folder = tmp_path / "run" / "a"
    for lr in (0.05, 0.01):
        run = trainer(tmp_path, 1, logger=CSVLogger(tmp_path, name="run", version="a"))
        run.fit(Logged(lr=lr), data())
    kept, current = rows(folder / "metrics-v1.csv"), rows(folder / "metrics.csv")
    assert [int(r["step"]) for r in kept if r["train_loss"]] == [0, 1, 2, 3]
    assert [int(r["step"]) for r in current if r["train_loss"]] == [0, 1, 2, 3]
    assert kept != current  # two runs, two files (the learning rates differ)
    assert json.loads((folder / "hparams-v1.yaml").read_text())["lr"] == 0.05
    assert json.loads((folder / "hparams.yaml").read_text())["lr"] == 0.01
    trainer(tmp_path, 1, logger=CSVLogger(tmp_path, name="run", version="a")).validate(
        Logged(), data(), verbose=False
    )
    assert len(rows(folder / "metrics.csv")) == len(current) + 1  # the stage added its row
    assert sorted(p.name for p in folder.iterdir() if p.suffix != ".ckpt") == [
        "checkpoints",
        "hparams-v1.yaml",
        "hparams.yaml",
        "metrics-v1.csv",
        "metrics.csv",
    ]


def test_without_a_version_each_run_has_its_own_folder(tmp_path: Path) -> None:
    """Lightning's default: a resume (like any run) gets the next version_N."""
    for _ in range(2):
        trainer(tmp_path, 1, logger=CSVLogger(tmp_path)).fit(Logged(), data())
    folders = sorted(p.name for p in (tmp_path / "lightning_logs").iterdir())
    assert folders == ["version_0", "version_1"]
    for folder in folders:
        assert len(rows(tmp_path / "lightning_logs" / folder / "metrics.csv")) == 4


@pytest.mark.parametrize("name", [None, "", "exp"])
def test_save_without_rows_leaves_the_version_folder(tmp_path: Path, name: str | None) -> None:
    """Lightning's test_file_logger_no_name: save() with nothing logged makes version_0 (empty, as
    Lightning 2.x leaves it; 1.4 wrote an empty hparams.yaml there); ddpkit made nothing."""
    logger = CSVLogger(tmp_path, name=name)
    logger.save()
    root = tmp_path / (name or "")
    assert logger.root_dir.rstrip("/") == str(root).rstrip("/")
    assert (root / "version_0").is_dir() and not list((root / "version_0").iterdir())


@pytest.mark.parametrize("kind", [CSVLogger, TensorBoardLogger])
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"save_dir": None}, r"save_dir=None\): save_dir is the folder the logs go to"),
        ({"save_dir": 3}, r"save_dir=3\): save_dir is the folder"),
        ({"name": 3}, r"name=3\): name is the experiment's folder"),
        ({"version": -1}, r"version=-1\): version is None"),
        ({"version": True}, r"version=True\): version is None"),
        ({"prefix": 1}, r"prefix=1\): prefix must be a str"),
    ],
)
def test_bad_arguments_are_refused_when_the_logger_is_built(
    tmp_path: Path, kind: type, arguments: dict[str, Any], message: str
) -> None:
    if kind is TensorBoardLogger:
        pytest.importorskip("tensorboard")
    given = {"save_dir": tmp_path, **arguments}
    with pytest.raises(MisconfigurationError, match=rf"^{kind.__name__}\(.*{message}.*Fix: "):
        kind(**given)


def test_an_object_as_version_is_refused_by_its_type_not_a_folder_named_after_it(
    tmp_path: Path,
) -> None:
    """Before, version=object() made a folder named '<object object at 0x...>'."""

    class Odd:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    for version in (object(), Odd()):
        with pytest.raises(MisconfigurationError, match=r"version=<.*object.*>\): version is"):
            CSVLogger(tmp_path, version=version)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", [CSVLogger, TensorBoardLogger])
def test_a_file_as_save_dir_is_refused_when_built(tmp_path: Path, kind: type) -> None:
    if kind is TensorBoardLogger:
        pytest.importorskip("tensorboard")
    (tmp_path / "a_file").write_text("")
    with pytest.raises(
        MisconfigurationError, match=r"is a file, not a folder\. Fix: pass a folder"
    ):
        kind(tmp_path / "a_file")


@pytest.mark.parametrize("every", [0, -1, 2.5, "10", True])
def test_flush_every_must_be_a_positive_int(tmp_path: Path, every: Any) -> None:
    """Before, 0 and -1 became 1 and 2.5 became 2, silently."""
    with pytest.raises(
        MisconfigurationError, match=r"flush_logs_every_n_steps=.*an int ≥ 1\. Fix: "
    ):
        CSVLogger(tmp_path, flush_logs_every_n_steps=every)


def test_flush_every_n_steps_writes_the_file_on_that_step(tmp_path: Path) -> None:
    logger = CSVLogger(tmp_path, name="", version="", flush_logs_every_n_steps=2)
    logger.log_metrics({"a": torch.tensor(1.0)}, step=0)
    assert not (tmp_path / "metrics.csv").exists()
    logger.log_metrics({"a": 2.0}, step=1)
    assert [r["a"] for r in rows(tmp_path / "metrics.csv")] == ["1.0", "2.0"]
