"""A job's private scratch directory and what its ranks leave there: each rank's error file
and stage counter (the rank's side writes them: :mod:`ddpkit._runtime.ranks._errorfile`,
:mod:`ddpkit._runtime.ranks._protocol`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ddpkit._runtime.ranks._errorfile import ErrorRecord, read_error_file
from ddpkit._runtime.ranks._scratch import make_private_dir, sweep_stale_dirs


class JobFiles:
    """The job's directory (:mod:`ddpkit._runtime.ranks._scratch`: 0700, each file 0600), made when
    the job starts and removed by :meth:`close` on every exit path; a launcher SIGKILLed before it
    could remove its own leaves one that the next job's sweep removes."""

    def __init__(self) -> None:
        sweep_stale_dirs()
        self._path: Path | None = make_private_dir()

    @property
    def path(self) -> Path:
        if self._path is None:
            raise RuntimeError("the job's directory is gone")
        return self._path

    def error_file(self, rank: int) -> Path:
        return self.path / f"rank{rank}.json"

    def stage_file(self, rank: int) -> Path:
        return self.path / f"rank{rank}.stages"

    def record_of(self, rank: int) -> ErrorRecord | None:
        """What rank ``rank`` left in its error file (None: nothing yet, or the job is over)."""
        return None if self._path is None else read_error_file(self.error_file(rank))

    def stages_of(self, rank: int) -> int:
        """How many stages rank ``rank`` has started (it says so in its stage file)."""
        try:
            return int(self.stage_file(rank).read_text() or 0)
        except (OSError, ValueError, RuntimeError):
            return 0

    def close(self) -> None:
        if self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            self._path = None
