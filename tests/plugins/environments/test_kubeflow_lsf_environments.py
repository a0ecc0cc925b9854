"""KubeflowEnvironment and LSFEnvironment with the variables their launchers set (neither
launcher can run here: a PyTorchJob needs a Kubernetes cluster, jsrun an LSF one)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from captured import torchrun

from ddpkit.connector import Flags, resolve
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments import KubeflowEnvironment, LSFEnvironment
from ddpkit.testing import make_probe

THIS = socket.gethostname()
ONE_PER_POD = Flags.of(accelerator="cpu", devices=1, num_nodes=3)


def _pod(rank: int) -> dict[str, str]:
    """What the PyTorchJob operator and Kubernetes give the container of replica ``rank``."""
    return {
        "KUBERNETES_PORT": "tcp://10.96.0.1:443", "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "MASTER_ADDR": "mnist-master-0", "MASTER_PORT": "23456",
        "WORLD_SIZE": "3", "RANK": str(rank), "PYTHONUNBUFFERED": "0",
    }  # fmt: skip


@pytest.mark.parametrize("rank", [0, 2])
def test_kubeflow_pod_plan(rank: int) -> None:
    plan = resolve(ONE_PER_POD, make_probe(env=_pod(rank)))
    assert (plan.environment.value, plan.launcher.value) == ("kubeflow", "external")
    assert plan.environment.reason == (
        f"KUBERNETES_PORT=tcp://10.96.0.1:443, MASTER_ADDR=mnist-master-0, MASTER_PORT=23456, "
        f"WORLD_SIZE=3, RANK={rank}"
    )
    k = KubeflowEnvironment(_pod(rank))
    assert (k.global_rank(), k.world_size(), k.local_rank(), k.node_rank()) == (rank, 3, 0, rank)
    assert (k.master_address(), k.master_port()) == ("mnist-master-0", 23456)


def test_torchrun_in_a_pod_is_torchruns_job() -> None:
    env = _pod(0) | torchrun("torchrun_nproc2", "1")
    plan = resolve(Flags.of(accelerator="cpu", devices=2), make_probe(env=env))
    assert plan.environment.value == "torchelastic"
    assert not KubeflowEnvironment.detect(env)


def test_not_a_pod_without_kubernetes_port() -> None:
    env = _pod(1)
    del env["KUBERNETES_PORT"]
    assert not KubeflowEnvironment.detect(env)


def test_kubeflow_one_process_per_pod() -> None:
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=3), make_probe(env=_pod(0)))
    message = str(err.value)
    assert "devices=2 processes on each node, but a PyTorchJob pod runs one process" in message
    assert "Fix: pass devices=1, num_nodes=3" in message


def test_kubeflow_pod_count_mismatch() -> None:
    with pytest.raises(
        MisconfigurationError,
        match=r"num_nodes\(2\) = 2, but the PyTorchJob "
        r"has WORLD_SIZE=3 pods\. Fix: pass devices=1, num_nodes=3",
    ):
        resolve(Flags.of(accelerator="cpu", num_nodes=2), make_probe(env=_pod(0)))


def _jsrun(tmp_path: Path, rank: int, local_rank: int, **extra: str) -> dict[str, str]:
    """jsrun's variables for rank ``rank`` of 4, two per host, and the job's rank file: the
    launch node first, then one line per slot (Open MPI's rank file format). The second host
    is this machine (the plan finds its node rank by the host name)."""
    rankfile = tmp_path / "rankfile"
    rankfile.write_text(f"batch1\nhostA\nhostA\n{THIS}\n{THIS}\n")
    return {
        "LSB_JOBID": "4242", "LSB_DJOB_RANKFILE": str(rankfile),
        "JSM_NAMESPACE_SIZE": "4", "JSM_NAMESPACE_RANK": str(rank),
        "JSM_NAMESPACE_LOCAL_RANK": str(local_rank), **extra,
    }  # fmt: skip


def test_lsf_plan_ranks_and_rendezvous(tmp_path: Path) -> None:
    env = _jsrun(tmp_path, 3, 1)
    plan = resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2),
                   make_probe(env=env))  # fmt: skip
    assert (plan.environment.value, plan.launcher.value) == ("lsf", "external")
    assert plan.environment.reason.startswith("LSB_JOBID=4242, LSB_DJOB_RANKFILE=")
    lsf = LSFEnvironment(env)
    assert (lsf.global_rank(), lsf.world_size(), lsf.local_rank(), lsf.node_rank()) == (3, 4, 1, 1)
    # The launch node runs no rank: the first compute host is the main address.
    assert lsf.main_address() == "hostA"
    assert lsf.main_port() == 10000 + 4242 % 1000
    assert LSFEnvironment(env | {"MASTER_PORT": "29500"}).master_port() == 29500
    assert LSFEnvironment(env, hostname="hostA.cluster.example").node_rank() == 0


def test_lsf_host_count_mismatch(tmp_path: Path) -> None:
    env = _jsrun(tmp_path, 0, 0)
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=1, num_nodes=4), make_probe(env=env))
    assert (
        f"num_nodes=4, but the job's rank file (LSB_DJOB_RANKFILE) lists 2 compute host(s): hostA, {THIS}"
        in str(err.value)
    )
    assert "Fix: pass devices=2, num_nodes=2" in str(err.value)


def test_lsf_this_host_not_in_the_rank_file(tmp_path: Path) -> None:
    lsf = LSFEnvironment(_jsrun(tmp_path, 0, 0), hostname="elsewhere")
    with pytest.raises(
        MisconfigurationError,
        match=r"this host 'elsewhere' is not among the "
        rf"job's hosts hostA, {THIS}",
    ):
        lsf.node_rank()


def test_lsf_without_the_rank_variable(tmp_path: Path) -> None:
    env = _jsrun(tmp_path, 0, 0)
    del env["JSM_NAMESPACE_RANK"]
    assert LSFEnvironment.detect(env)  # Lightning 2.x's rule does not require it...
    with pytest.raises(MisconfigurationError, match="JSM_NAMESPACE_RANK, which is not set"):
        resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2), make_probe(env=env))
