"""A real ``mpirun -np 2`` (Open MPI) and ``mpiexec -n 2`` (MPICH) start every rank of an
unchanged ddpkit script; ddpkit detects MPI and starts nothing. The same script under ddpkit's
own subprocess DDP, with the same seed, ends on the same weights.

Each launch costs two torch imports (about 5 s on two cores): one training run per MPI, one
reference run, one fault per MPI.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clusters import EXAMPLE, PYTHON, Started, clean_env, read_reports, run
from mpi import MPI, MPIS

FLAGS = ["--accelerator", "cpu", "--devices", "2", "--strategy", "ddp"]
FAULTY = Path(__file__).parent / "fault_scripts" / "faulty_run.py"


@pytest.fixture(scope="module")
def subprocess_weights(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The weights ddpkit's own subprocess DDP ends on (rank 0 starts rank 1)."""
    tmp = tmp_path_factory.mktemp("subprocess")
    command = [PYTHON, str(EXAMPLE), *FLAGS, "--report-dir", str(tmp / "reports"),
               "--root-dir", str(tmp / "run")]  # fmt: skip
    run(command, env=clean_env(tmp), log=tmp / "run.log", timeout=150).check()
    ranks = read_reports(tmp / "reports")
    assert [r["environment"] for r in ranks] == ["LocalEnvironment"] * 2
    assert ranks[0]["weights"] == ranks[1]["weights"]
    return str(ranks[0]["weights"])


@pytest.mark.xdist_group("mpirun-reference")
@pytest.mark.timeout(200)
@pytest.mark.parametrize("mpi", MPIS, ids=lambda m: m.folder)
def test_mpirun_two_ranks_same_weights_as_subprocess_ddp(
    tmp_path: Path, mpi: MPI, subprocess_weights: str
) -> None:
    reports = tmp_path / "reports"
    command = mpi.command(2, PYTHON, str(EXAMPLE), *FLAGS, "--report-dir", str(reports),
                          "--root-dir", str(tmp_path / "run"))  # fmt: skip
    # No MASTER_ADDR/MASTER_PORT: MPI itself tells the ranks where rank 0 listens (mpi4py).
    env = clean_env(tmp_path, **mpi.env(mpi4py=True))
    started = Started(command, env=env, log=tmp_path / "mpi.log")
    try:
        finished = started.wait(150).check()
    finally:
        started.kill()
    ranks = read_reports(reports)
    assert [r["global_rank"] for r in ranks] == [0, 1]
    assert [r["environment"] for r in ranks] == ["MPIEnvironment"] * 2
    assert [r["launcher"] for r in ranks] == ["external"] * 2
    assert [(r["node_rank"], r["local_rank"]) for r in ranks] == [(0, 0), (0, 1)]
    # Each MPI process is one rank: none started a process of its own.
    assert [r["children"] for r in ranks] == [[], []]
    assert {r["weights"] for r in ranks} == {subprocess_weights}
    # The plan says MPI, with the variables that decided it.
    rank_var = "OMPI_COMM_WORLD_RANK=0" if mpi.folder == "openmpi" else "PMI_RANK=0"
    assert "environment     mpi" in finished.output
    assert rank_var in finished.output


@pytest.mark.timeout(200)
@pytest.mark.parametrize(
    "mpi",
    [
        MPIS[0],
        pytest.param(
            MPIS[1],
            marks=pytest.mark.full_suite(
                "the plan that needs no mpi4py is the same under both MPIs (Open MPI's run "
                "shows it), and MPICH's own launch is its weights test's"
            ),
        ),
    ],
    ids=lambda m: m.folder,
)
def test_a_raising_rank_fails_the_mpi_job(tmp_path: Path, mpi: MPI) -> None:
    command = mpi.command(2, PYTHON, str(FAULTY), "--launcher", "subprocess",
                          "--fault", "raise", "--rank", "1")  # fmt: skip
    # MASTER_PORT given, no mpi4py: the ranks meet without asking MPI.
    env = clean_env(tmp_path, MASTER_PORT=str(free_port()), **mpi.env(mpi4py=False))
    finished = run(command, env=env, log=tmp_path / "mpi.log", timeout=150)
    assert finished.returncode != 0, finished.output
    assert "RuntimeError: injected fault on rank 1" in finished.output
    assert "mpi4py" not in finished.output  # the plan needed nothing more


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
