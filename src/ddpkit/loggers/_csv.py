"""``CSVLogger``: metrics to ``<save_dir>/<name>/version_<N>/metrics.csv`` (Lightning's layout).

``Trainer(logger=True)`` uses ``CSVLogger(default_root_dir, name="", version="")``: the file is
``<default_root_dir>/metrics.csv``. Rows are ``(epoch, step, metric...)``; columns grow as new
metrics appear; the file is rewritten atomically at every save (small files; never
half-written). A file that exists already is never lost: its rows stay first and the new ones
follow (a resumed fit continues its history; ``version=None`` gives each run its own
``version_N`` folder, as in Lightning).
"""

from __future__ import annotations

import csv
import io
import os
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ddpkit.errors import MisconfigurationError
from ddpkit.loggers._base import (
    DummyExperiment,
    FolderLogger,
    check_folder_arguments,
    convert_params,
    scalar,
    write_yaml,
)
from ddpkit.utilities._files import atomic_write
from ddpkit.utilities._paths import local_path
from ddpkit.utilities._rank_zero import log_info


class ExperimentWriter:
    """The rows and the hyperparameters of one run, and the files they go to."""

    NAME_METRICS_FILE = "metrics.csv"
    NAME_HPARAMS_FILE = "hparams.yaml"

    def __init__(self, log_dir: str, *, new_run: bool = False) -> None:
        """The rows of a ``metrics.csv`` already in ``log_dir`` are never lost: a new run (a
        fit that resumes nothing) finds them moved aside to ``metrics-v<N>.csv`` (and the run's
        ``hparams.yaml`` to ``hparams-v<N>.yaml``) and starts its own file; any other stage (a
        resumed fit, validate, test) keeps them, and the first save writes them back before the
        new ones."""
        self.log_dir = log_dir
        self.metrics_file_path = os.path.join(log_dir, self.NAME_METRICS_FILE)
        self.metrics: list[dict[str, Any]] = []
        self.hparams: dict[str, Any] = {}
        folder = local_path(log_dir)
        folder.mkdir(parents=True, exist_ok=True)
        existing = folder / self.NAME_METRICS_FILE
        if new_run and existing.is_file():
            _set_aside(existing, folder / self.NAME_HPARAMS_FILE)
        if existing.is_file():
            with existing.open(newline="") as fh:
                self.metrics = [
                    {k: v for k, v in row.items() if v != ""} for row in csv.DictReader(fh)
                ]

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        row: dict[str, Any] = {k: scalar(v) for k, v in metrics.items()}
        if "epoch" in row:
            row["epoch"] = int(row["epoch"])
        row["step"] = step if step is not None else len(self.metrics)
        self.metrics.append(row)

    def log_hparams(self, params: Mapping[str, Any]) -> None:
        self.hparams.update(params)
        write_yaml(os.path.join(self.log_dir, self.NAME_HPARAMS_FILE), self.hparams)

    def save(self) -> None:
        if not self.metrics:
            return
        # every key in the order first logged, after epoch and step
        columns = list(dict.fromkeys(["epoch", "step", *(k for row in self.metrics for k in row)]))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(self.metrics)
        target = local_path(self.metrics_file_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, buf.getvalue().encode())


def _set_aside(metrics: Path, hparams: Path) -> None:
    """An earlier run's files, renamed to the first free ``-v<N>`` (ModelCheckpoint's rule for
    a name taken), with an INFO line saying where they are."""
    version = 1
    while metrics.with_name(f"{metrics.stem}-v{version}{metrics.suffix}").exists():
        version += 1
    kept = metrics.with_name(f"{metrics.stem}-v{version}{metrics.suffix}")
    metrics.rename(kept)
    if hparams.is_file():
        hparams.rename(hparams.with_name(f"{hparams.stem}-v{version}{hparams.suffix}"))
    log_info(
        f"CSVLogger: {metrics} held an earlier run's metrics; they are kept in {kept.name} "
        f"and this run writes {metrics.name} (CSVLogger(save_dir) gives each run a version_N "
        f"folder instead)."
    )


class CSVLogger(FolderLogger):
    """Log to ``<save_dir>/<name>/<version>/metrics.csv`` and ``hparams.yaml``.

    ``name`` None or "" puts the versions straight into ``save_dir``; ``version`` None takes the
    next free ``version_N``, an int names ``version_<int>``, a string is used as it is (""
    writes into the name folder itself). ``prefix`` goes in front of every metric name.
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        name: str | None = "lightning_logs",
        version: int | str | None = None,
        prefix: str = "",
        flush_logs_every_n_steps: int = 100,
    ) -> None:
        given = {
            "save_dir": save_dir,
            "name": name,
            "version": version,
            "prefix": prefix,
            "flush_logs_every_n_steps": flush_logs_every_n_steps,
        }
        call = check_folder_arguments("CSVLogger", given, CSVLogger.__init__)
        every = flush_logs_every_n_steps
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise MisconfigurationError(
                f"{call}: flush_logs_every_n_steps is how many steps apart the file is written, an "
                f"int ≥ 1. Fix: flush_logs_every_n_steps=100."
            )
        super().__init__(save_dir, name, version)
        self._prefix = prefix
        self._flush_every = every
        self._experiment: ExperimentWriter | None = None
        self._new_run = False

    @property
    def log_dir(self) -> str:
        return self._version_dir()

    @property
    def experiment(self) -> ExperimentWriter | DummyExperiment:
        if self.rank != 0:
            return DummyExperiment()
        if self._experiment is None:
            self._experiment = ExperimentWriter(self.log_dir, new_run=self._new_run)
            self._new_run = False
        return self._experiment

    def begin_run(self, new: bool) -> None:
        """Called by ddpkit's loop before a stage: ``new`` for a fit that resumes nothing. A
        logger that has written in this process goes on in its file whatever comes."""
        self._new_run = new and self._experiment is None

    def log_hyperparams(
        self, params: Mapping[str, Any] | Namespace | None = None, *args: Any, **kw: Any
    ) -> None:
        """``hparams.yaml``, nested as given (Lightning's CSVLogger does not flatten)."""
        if self.rank == 0:
            self.experiment.log_hparams(convert_params(params))

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        if self.rank != 0:
            return
        if self._prefix:
            metrics = {f"{self._prefix}{self.LOGGER_JOIN_CHAR}{k}": v for k, v in metrics.items()}
        self.experiment.log_metrics(metrics, step)
        if step is not None and (step + 1) % self._flush_every == 0:
            self.save()

    def save(self) -> None:
        """Write the rows logged so far; the version folder exists afterwards (Lightning's)."""
        if self.rank == 0:
            writer = self.experiment
            assert isinstance(writer, ExperimentWriter)
            writer.save()

    def finalize(self, status: str) -> None:
        """The stage ended: write what is buffered (a logger that never wrote stays without a
        folder, as Lightning's does)."""
        if self._experiment is not None:
            self.save()

    def __getstate__(self) -> dict[str, Any]:
        # A spawned rank opens its own writer, which reads back the rows already written.
        if self._experiment is not None:
            self._experiment.save()
        state = self.__dict__.copy()
        state["_experiment"] = None
        return state
