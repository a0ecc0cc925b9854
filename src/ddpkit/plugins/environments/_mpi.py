"""An MPI launcher (``mpirun`` / ``mpiexec`` of Open MPI or MPICH) started every rank.

ddpkit reads the ranks from the variables the launcher's own daemons give each process, and
never initializes MPI to detect it (Lightning 2.x's ``MPIEnvironment.detect()`` imports mpi4py,
which calls ``MPI_Init``: the plan stays a pure function of the environment here):

=================  =============================  ============================
what               Open MPI (``mpirun``, prte)    MPICH / Intel MPI (Hydra)
=================  =============================  ============================
global rank        ``OMPI_COMM_WORLD_RANK``       ``PMI_RANK``
world size         ``OMPI_COMM_WORLD_SIZE``       ``PMI_SIZE``
local rank         ``OMPI_COMM_WORLD_LOCAL_RANK``  ``MPI_LOCALRANKID``
ranks on the node  ``OMPI_COMM_WORLD_LOCAL_SIZE``  ``MPI_LOCALNRANKS``
=================  =============================  ============================

Detected when one column's first three are set and the world size is above 1 (Lightning's
rule: a one-process ``mpirun`` leaves the ranks of its node to ddpkit). ``srun --mpi=pmi2``
sets ``PMI_RANK`` / ``PMI_SIZE`` but no local rank: such a task is SLURM's.

Where the ranks meet. ``MASTER_ADDR`` / ``MASTER_PORT`` when the user sets them
(``mpirun -x MASTER_ADDR=node0 -x MASTER_PORT=29500``, ``mpiexec -genv MASTER_PORT 29500``).
Otherwise the address is 127.0.0.1 when every rank runs on this node; across nodes it is rank
0's host name, and the port one rank 0 binds, both sent to every rank by MPI itself
(``MPI.COMM_WORLD.bcast`` through mpi4py, once, while the ranks set up), as Lightning does.
Nothing else in the environment can tell a rank where rank 0 listens: MPICH exports no job id
to derive a port from, and neither launcher says where rank 0 runs. So mpi4py
(``pip install mpi4py``) is needed only for that one exchange, and without it or the
two variables the plan says what to set, before training starts.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ExternalEnvironment


@dataclass(frozen=True)
class MPIFlavour:
    """The variables one MPI launcher sets, and how a user passes a variable through it."""

    name: str
    rank: str
    size: str
    local_rank: str
    local_size: str
    #: how the launcher exports a variable to every rank: ``{flag} MASTER_PORT=29500``
    export: str
    launcher: str

    @property
    def required(self) -> tuple[str, str, str]:
        return (self.rank, self.size, self.local_rank)


OPEN_MPI = MPIFlavour(
    "Open MPI",
    rank="OMPI_COMM_WORLD_RANK",
    size="OMPI_COMM_WORLD_SIZE",
    local_rank="OMPI_COMM_WORLD_LOCAL_RANK",
    local_size="OMPI_COMM_WORLD_LOCAL_SIZE",
    export="mpirun -x MASTER_ADDR=<rank 0's host> -x MASTER_PORT=29500",
    launcher="mpirun",
)
MPICH = MPIFlavour(
    "MPICH",
    rank="PMI_RANK",
    size="PMI_SIZE",
    local_rank="MPI_LOCALRANKID",
    local_size="MPI_LOCALNRANKS",
    export="mpiexec -genv MASTER_ADDR <rank 0's host> -genv MASTER_PORT 29500",
    launcher="mpiexec",
)
_FLAVOURS = (OPEN_MPI, MPICH)


def flavour_of(env: Mapping[str, str]) -> MPIFlavour | None:
    """The MPI launcher whose variables ``env`` holds (None: no MPI launcher started it)."""
    return next((f for f in _FLAVOURS if all(k in env for k in f.required)), None)


def mpi4py_installed() -> bool:
    """mpi4py can be imported (looked up, not imported: importing it initializes MPI)."""
    return importlib.util.find_spec("mpi4py") is not None


class MPIEnvironment(ExternalEnvironment):
    """``mpirun -np N python train.py``: each MPI process is one rank; ddpkit starts nothing.

    See the module docstring for the variables and where the ranks meet. ``mpi4py`` says
    whether mpi4py can be imported (the connector passes what its probe saw; None looks).
    """

    name: ClassVar[str] = "mpi"
    detection_variables: ClassVar[tuple[str, ...]] = (
        *(k for f in _FLAVOURS for k in (f.rank, f.size, f.local_rank, f.local_size)),
        "MASTER_ADDR",
        "MASTER_PORT",
    )

    def __init__(self, env: Mapping[str, str] | None = None, *, mpi4py: bool | None = None):
        super().__init__(env)
        self._mpi4py = mpi4py
        self._main: tuple[str, int] | None = None

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        flavour = flavour_of(env)
        if flavour is None:
            return False
        size = env[flavour.size].strip()
        return size.isascii() and size.isdigit() and int(size) > 1

    @property
    def flavour(self) -> MPIFlavour:
        found = flavour_of(self.env)
        if found is None:
            raise MisconfigurationError(
                "Trainer(plugins=[MPIEnvironment()]): no MPI launcher started this process "
                "(neither OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK nor PMI_RANK/PMI_SIZE/"
                "MPI_LOCALRANKID is set). Fix: start it with `mpirun -np N python script.py`, or "
                "drop the MPIEnvironment and ddpkit starts the ranks itself."
            )
        return found

    def world_size(self) -> int:
        return self._int(self.flavour.size)

    def global_rank(self) -> int:
        return self._int(self.flavour.rank)

    def local_rank(self) -> int:
        return self._int(self.flavour.local_rank)

    def local_world_size(self) -> int:
        """Ranks on this node (the launcher says; without it, every rank is on this node)."""
        return self._int(self.flavour.local_size, self.world_size())

    def num_nodes(self) -> int:
        return max(1, self.world_size() // max(1, self.local_world_size()))

    def node_rank(self) -> int:
        # Both launchers place ranks in blocks by default (ranks 0..L-1 on the first node, and
        # so on; within a node Open MPI may number the local ranks in another order). A
        # round-robin placement (Open MPI's --map-by node) is not told apart: docs/launchers/mpi.md.
        return self.global_rank() // max(1, self.local_world_size())

    def main_address(self) -> str:
        if "MASTER_ADDR" in self.env:
            return self.env["MASTER_ADDR"]
        if self.num_nodes() == 1:
            return "127.0.0.1"
        return self._ask_mpi()[0]

    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._int("MASTER_PORT")
        return self._ask_mpi()[1]

    def _ask_mpi(self) -> tuple[str, int]:
        """Rank 0's host name and a port it has bound for the store, sent to every rank by MPI
        (a collective: every rank asks at the same point of its set-up)."""
        if self._main is None:
            from ddpkit.plugins.environments._mpi_exchange import exchange_main

            self._main = exchange_main(
                world_size=self.world_size(),
                local_only=self.num_nodes() == 1,
                launcher=self.flavour.name,
            )
        return self._main

    # -- checks ----------------------------------------------------------------------------------

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        f = self.flavour
        self._check_integers(call, (f.rank, f.size, f.local_rank, f.local_size, "MASTER_PORT"))
        size, local = self.world_size(), self.local_world_size()
        nodes = self.num_nodes()
        fix = (
            f"Fix: pass devices={local}, num_nodes={nodes} (or start {f.launcher} with "
            f"-np {devices * num_nodes}, {devices} per node)."
        )
        if devices * num_nodes != size:
            raise MisconfigurationError(
                f"{call}: devices({devices}) × num_nodes({num_nodes}) = {devices * num_nodes}, "
                f"but {f.launcher} ({f.name}) started {f.size}={size} ranks "
                f"({f.local_size}={local} on this node). {fix}"
            )
        if devices != local:
            raise MisconfigurationError(
                f"{call}: devices={devices} processes on each node, but {f.launcher} "
                f"({f.name}) started {f.local_size}={local} on this one ({f.size}={size}). {fix}"
            )
        self._check_rendezvous(call, nodes)

    def _check_rendezvous(self, call: str, nodes: int) -> None:
        missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in self.env]
        if nodes == 1 and "MASTER_ADDR" in missing:
            missing.remove("MASTER_ADDR")  # every rank is here: 127.0.0.1
        if not missing or (mpi4py_installed() if self._mpi4py is None else self._mpi4py):
            return
        f = self.flavour
        where = f"{nodes} nodes" if nodes > 1 else "this node"
        raise MisconfigurationError(
            f"{call}: {f.launcher} ({f.name}) started {self.world_size()} ranks on {where}, "
            f"but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set and "
            f"mpi4py is not installed, so the ranks cannot learn where rank 0 listens. Fix: "
            f"pip install mpi4py (mpi4py: MPI tells every rank, as in Lightning), or "
            f"`{f.export} python script.py`."
        )

    def __repr__(self) -> str:
        return "MPIEnvironment()"
