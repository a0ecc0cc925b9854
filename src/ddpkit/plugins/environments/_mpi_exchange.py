"""The one thing ddpkit asks MPI itself: where rank 0's store listens (see
:mod:`ddpkit.plugins.environments._mpi`). Imported only when ``MASTER_ADDR`` / ``MASTER_PORT``
do not say it; importing mpi4py initializes MPI in this process (``MPI_Init``), and mpi4py
finalizes it at exit.
"""

from __future__ import annotations

import socket

from ddpkit._runtime.ranks._rendezvous import host_for
from ddpkit.errors import MisconfigurationError


def exchange_main(*, world_size: int, local_only: bool, launcher: str) -> tuple[str, int]:
    """Rank 0's host name and the port of a listening socket it bound (kept for its store, so
    the port is never free in between), broadcast to every rank: Lightning's
    ``MPIEnvironment`` sends the same two, its port merely chosen free and let go."""
    try:
        from mpi4py import MPI
    except ImportError as err:
        raise MisconfigurationError(
            f"{launcher} started this rank without MASTER_ADDR/MASTER_PORT, and mpi4py cannot "
            f"be imported ({err}). Fix: pip install mpi4py, or set MASTER_ADDR and "
            f"MASTER_PORT for every rank."
        ) from err
    comm = MPI.COMM_WORLD
    if comm.Get_size() != world_size:
        # mpi4py loaded another MPI library than the launcher's: alone in a world of one, every
        # rank would be "rank 0" and wait for the others forever.
        raise MisconfigurationError(
            f"{launcher} started {world_size} ranks, but mpi4py's MPI sees a world of "
            f"{comm.Get_size()} ({MPI.Get_library_version().splitlines()[0].strip()}): it is "
            f"not the MPI whose launcher started this job. Fix: use the mpirun of the MPI "
            f"mpi4py loads (or point MPI4PY_LIBMPI at the launcher's libmpi.so), or set "
            f"MASTER_ADDR and MASTER_PORT for every rank."
        )
    main: tuple[str, int] | None = None
    if comm.Get_rank() == 0:
        host = host_for(None, local_only=local_only)
        main = ("127.0.0.1" if local_only else socket.gethostname(), host.port)
    sent: tuple[str, int] = comm.bcast(main, root=0)
    return sent
