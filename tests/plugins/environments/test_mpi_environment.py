"""MPIEnvironment, fed with the exact variables real mpirun (Open MPI) and mpiexec (MPICH)
processes got (mpi_variables.json); the real launchers run in tests/integration/test_mpirun.py."""

from __future__ import annotations

import pytest
from captured import mpi, scenarios, slurm

from ddpkit.connector import Flags, resolve
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments import MPIEnvironment
from ddpkit.testing import make_probe

DDP2 = Flags.of(accelerator="cpu", devices=2, strategy="ddp")
SEVERAL = [(s, r) for s, r in scenarios("mpi") if not s.endswith(("np1", "n1"))]


@pytest.mark.parametrize(("scenario", "rank"), SEVERAL)
def test_ranks_of_every_real_process(scenario: str, rank: str) -> None:
    env = mpi(scenario, rank)
    assert MPIEnvironment.detect(env)
    e = MPIEnvironment(env)
    size = 3 if "np3" in scenario else 2
    assert (e.global_rank(), e.world_size(), e.node_rank()) == (int(rank), size, 0)
    assert e.local_world_size() == size
    # One node: the ranks meet on loopback without asking MPI.
    assert e.main_address() == "127.0.0.1"


@pytest.mark.parametrize("scenario", ["openmpi_np1", "mpich_n1"])
def test_one_process_is_not_detected(scenario: str) -> None:
    # Lightning's rule: world size 1 leaves the ranks of this node to ddpkit.
    assert not MPIEnvironment.detect(mpi(scenario))


def test_open_mpi_local_ranks_out_of_order_on_one_node() -> None:
    # Real: -np 3 on 2 cores numbered the local ranks 0, 2, 1; still node 0 for all.
    env = mpi("openmpi_np3_oversubscribed", "2")
    e = MPIEnvironment(env)
    assert (e.global_rank(), e.local_rank(), e.node_rank()) == (2, 1, 0)
    plan = resolve(Flags.of(accelerator="cpu", devices=3), make_probe(env=env, mpi4py=True))
    assert plan.environment.value == "mpi"


@pytest.mark.parametrize(
    ("scenario", "decided"),
    [
        ("openmpi_np2", "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=2, "
                        "OMPI_COMM_WORLD_LOCAL_RANK=1, OMPI_COMM_WORLD_LOCAL_SIZE=2"),
        ("mpich_n2", "PMI_RANK=1, PMI_SIZE=2, MPI_LOCALRANKID=1, MPI_LOCALNRANKS=2"),
    ],
)  # fmt: skip
def test_plan_is_external_and_names_the_variables(scenario: str, decided: str) -> None:
    env = mpi(scenario, "1") | {"MASTER_PORT": "29511"}
    plan = resolve(DDP2, make_probe(env=env))
    assert (plan.environment.value, plan.training_type.value) == ("mpi", "ddp")
    assert plan.launcher.value == "external"
    assert plan.environment.reason == f"{decided}, MASTER_PORT=29511"
    e = MPIEnvironment(env)
    assert (e.main_address(), e.main_port()) == ("127.0.0.1", 29511)


def test_every_legacy_spelling_is_ddp_in_each_mpi_process() -> None:
    env = mpi("mpich_n2", "0")
    plan = resolve(
        Flags.of(accelerator="ddp_cpu", num_processes=2), make_probe(env=env, mpi4py=True)
    )
    assert (plan.environment.value, plan.training_type.value, plan.launcher.value) == (
        "mpi", "ddp", "external",
    )  # fmt: skip


def test_without_a_port_nor_mpi4py_the_plan_says_what_to_set() -> None:
    with pytest.raises(MisconfigurationError) as err:
        resolve(DDP2, make_probe(env=mpi("mpich_n2", "0")))
    message = str(err.value)
    assert message.startswith(
        "Trainer(accelerator='cpu', devices=2, strategy='ddp'): mpiexec (MPICH)"
    )
    assert "MASTER_PORT is not set and mpi4py is not installed" in message
    assert "pip install mpi4py" in message
    assert "mpiexec -genv MASTER_ADDR <rank 0's host> -genv MASTER_PORT 29500" in message


def test_world_size_mismatch_shows_the_arithmetic() -> None:
    env = mpi("openmpi_np2", "0")
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=4), make_probe(env=env, mpi4py=True))
    message = str(err.value)
    assert (
        "devices(4) × num_nodes(1) = 4, but mpirun (Open MPI) started OMPI_COMM_WORLD_SIZE=2"
        in message
    )
    assert "Fix: pass devices=2, num_nodes=1" in message


def _two_nodes(rank: int) -> dict[str, str]:
    """Open MPI's variables for rank ``rank`` of 4, two per node (made by hand: the real
    two-host launch needs a remote shell)."""
    return {
        "OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % 2), "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    }  # fmt: skip


def test_two_nodes_node_rank_and_master_addr() -> None:
    env = _two_nodes(3) | {"MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
    resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2), make_probe(env=env))
    e = MPIEnvironment(env)
    assert (e.global_rank(), e.local_rank(), e.node_rank(), e.num_nodes()) == (3, 1, 1, 2)
    assert (e.main_address(), e.main_port()) == ("node0", 29500)


def test_two_nodes_per_node_mismatch() -> None:
    with pytest.raises(
        MisconfigurationError,
        match=r"devices=1 processes on each node, but "
        r"mpirun \(Open MPI\) started OMPI_COMM_WORLD_LOCAL_SIZE=2 on this one",
    ):
        resolve(Flags.of(accelerator="cpu", devices=1, num_nodes=4),
                make_probe(env=_two_nodes(0), mpi4py=True))  # fmt: skip


def test_two_nodes_without_master_addr_nor_mpi4py() -> None:
    env = _two_nodes(0) | {"MASTER_PORT": "29500"}
    with pytest.raises(MisconfigurationError, match=r"on 2 nodes, but MASTER_ADDR is not set"):
        resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2), make_probe(env=env))


def test_mpi_comes_before_the_slurm_step_of_its_daemons() -> None:
    # mpirun inside an allocation starts its daemons on the other nodes with srun: their ranks
    # carry that step's variables (one task per node), but they are mpirun's ranks.
    env = slurm("srun_ntasks2", "1") | _two_nodes(2) | {"MASTER_ADDR": "n1", "MASTER_PORT": "1"}
    plan = resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2), make_probe(env=env))
    assert plan.environment.value == "mpi"


def test_srun_pmi2_task_is_slurms() -> None:
    # srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE but no MPI_LOCALRANKID.
    env = slurm("srun_ntasks2", "1") | {"PMI_RANK": "1", "PMI_SIZE": "2"}
    plan = resolve(DDP2, make_probe(env=env))
    assert plan.environment.value == "slurm"


def test_one_spelling_or_the_other() -> None:
    e = MPIEnvironment(mpi("openmpi_np2", "1") | {"MASTER_PORT": "29500"})
    assert e.creates_children() and e.creates_processes_externally
    assert (e.master_address(), e.master_port()) == ("127.0.0.1", 29500)
