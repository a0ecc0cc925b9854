"""TorchElasticEnvironment, fed with the exact variables real torchrun workers got."""

from __future__ import annotations

import pytest
from captured import scenarios, slurm, torchrun

from ddpkit.connector import Flags, resolve
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments import TorchElasticEnvironment
from ddpkit.testing import make_probe


@pytest.mark.parametrize(("scenario", "rank"), scenarios("torchrun"))
def test_detected_on_every_real_worker(scenario: str, rank: str) -> None:
    env = torchrun(scenario, rank)
    assert TorchElasticEnvironment.detect(env)
    t = TorchElasticEnvironment(env)
    assert t.global_rank() == int(rank)
    assert (t.main_address(), t.main_port()) == (env["MASTER_ADDR"], int(env["MASTER_PORT"]))


@pytest.mark.parametrize("missing", ["RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK"])
def test_not_detected_without_each_rank_variable(missing: str) -> None:
    env = torchrun("torchrun_nproc2", "1")
    del env[missing]
    assert not TorchElasticEnvironment.detect(env)


@pytest.mark.parametrize(
    "flags",
    [
        {"accelerator": "ddp_cpu", "num_processes": 2},
        {"accelerator": "cpu", "devices": 2, "strategy": "ddp_spawn"},
        {"accelerator": "cpu", "devices": 2, "strategy": "ddp"},
    ],
)
def test_every_spelling_is_ddp_with_nothing_launched(flags: dict[str, object]) -> None:
    env = torchrun("torchrun_nproc2", "1")
    plan = resolve(Flags.of(**flags), make_probe(env=env))
    assert (plan.environment.value, plan.training_type.value) == ("torchelastic", "ddp")
    assert plan.launcher.value == "external"
    assert f"TORCHELASTIC_RUN_ID={env['TORCHELASTIC_RUN_ID']}" in plan.environment.reason


def test_two_nodes_node_rank_from_group_rank() -> None:
    env = torchrun("torchrun_nnodes2", "1")
    resolve(Flags.of(accelerator="cpu", devices=1, num_nodes=2), make_probe(env=env))
    t = TorchElasticEnvironment(env)
    assert (t.global_rank(), t.node_rank(), t.local_rank(), t.world_size()) == (1, 1, 0, 2)


def test_world_size_mismatch_shows_the_arithmetic() -> None:
    env = torchrun("torchrun_nproc2", "0")
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=4, num_nodes=2), make_probe(env=env))
    message = str(err.value)
    assert message.startswith("Trainer(accelerator='cpu', devices=4, num_nodes=2): ")
    assert "devices(4) × num_nodes(2) = 8, but torchrun started WORLD_SIZE=2" in message
    assert "Fix: pass devices=2, num_nodes=1" in message


def test_processes_per_node_mismatch() -> None:
    # 1 × 2 = 2 = WORLD_SIZE, but torchrun put both processes on this node.
    env = torchrun("torchrun_nproc2", "0")
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=1, num_nodes=2), make_probe(env=env))
    message = str(err.value)
    assert "devices=1 processes on each node, but torchrun started LOCAL_WORLD_SIZE=2" in message
    assert "(WORLD_SIZE=2 = 2 × 1 nodes)" in message
    assert "Fix: pass devices=2, num_nodes=1" in message


def test_torchrun_inside_a_slurm_step_is_torchruns_job() -> None:
    env = slurm("srun_ntasks2", "0") | torchrun("torchrun_nproc2", "1")
    plan = resolve(Flags.of(accelerator="cpu", devices=2), make_probe(env=env))
    assert plan.environment.value == "torchelastic"
