"""SLURMEnvironment, fed with the exact variables real srun / sbatch / salloc runs produced."""

from __future__ import annotations

import pickle

import pytest
from captured import scenarios, slurm

from ddpkit.connector import Flags, resolve
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments import SLURMEnvironment
from ddpkit.plugins.environments._slurm import (
    expand_nodelist,
    expand_tasks_per_node,
    slurm_local_reason,
    srun_warning,
)
from ddpkit.testing import make_probe


@pytest.mark.parametrize(
    ("nodelist", "hosts"),
    [
        ("vm", ["vm"]),
        ("dkn[1-2]", ["dkn1", "dkn2"]),  # what the two-namespace cluster gave
        ("node[01-03,7]", ["node01", "node02", "node03", "node7"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("a[1-2],b3,c[5]", ["a1", "a2", "b3", "c5"]),
        ("gpu-a100-[1-2],cpu-x", ["gpu-a100-1", "gpu-a100-2", "cpu-x"]),
        ("r[1-2]-n[1-2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
        ("", []),
    ],
)
def test_expand_nodelist(nodelist: str, hosts: list[str]) -> None:
    assert expand_nodelist(nodelist) == hosts


@pytest.mark.parametrize(
    ("nodelist", "first"),
    [  # Lightning 1.4's test_master_address_from_slurm_node_list
        ("alpha,beta,gamma", "alpha"),
        ("alpha beta gamma", "alpha"),
        ("1.2.3.[100-110]", "1.2.3.100"),
        ("1.2.3.[089, 100-110]", "1.2.3.089"),
        ("host[22]", "host22"),
        ("host[1,5-9]", "host1"),
        ("host[5-9,1]", "host5"),
        ("alpha, beta", "alpha"),
        ("alpha beta, gamma", "alpha"),
        ("alpha", "alpha"),
    ],
)
def test_the_main_address_is_the_node_lists_first_host(nodelist: str, first: str) -> None:
    """A list with spaces gave the whole string as the address."""
    assert SLURMEnvironment({"SLURM_NODELIST": nodelist}).main_address() == first


@pytest.mark.parametrize("kind", ["slurm", "torchelastic"])
def test_the_rank_setters_are_ignored_and_say_so(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Lightning 1.4 logged (DEBUG) that the launcher's ranks cannot be set; ddpkit said
    nothing."""
    from ddpkit.plugins.environments import TorchElasticEnvironment

    env = (
        SLURMEnvironment(slurm("srun_ntasks2", "0"))
        if kind == "slurm"
        else TorchElasticEnvironment({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2",
                                      "GROUP_RANK": "0", "LOCAL_WORLD_SIZE": "2"})
    )  # fmt: skip
    before = (env.world_size(), env.global_rank())
    with caplog.at_level("DEBUG", logger="ddpkit.plugins.environments"):
        env.set_world_size(100)
        env.set_global_rank(100)
    assert (env.world_size(), env.global_rank()) == before
    name = type(env).__name__
    assert f"{name}.set_world_size was called, but setting world size is not allowed" in caplog.text
    assert (
        f"{name}.set_global_rank was called, but setting global rank is not allowed" in caplog.text
    )


def test_an_unreadable_tasks_per_node_names_the_call() -> None:
    """Found by the flag fuzzer: the message started with the variable, not the call."""
    env = {"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2",
           "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_JOB_ID": "77",
           "SLURM_NNODES": "1", "SLURM_TASKS_PER_NODE": "x"}  # fmt: skip
    with pytest.raises(MisconfigurationError, match=r"^Trainer\(\): SLURM_TASKS_PER_NODE='x'"):
        resolve(Flags.of(), make_probe(env=env))


def test_expand_nodelist_rejects_what_it_cannot_read() -> None:
    with pytest.raises(MisconfigurationError, match=r"SLURM_NODELIST='n\[a-b\]'.*\[a-b\]"):
        expand_nodelist("n[a-b]")


@pytest.mark.parametrize(
    ("spec", "counts"),
    [("2", [2]), ("1(x2)", [1, 1]), ("2,1", [2, 1]), ("2(x3),1", [2, 2, 2, 1])],
)
def test_expand_tasks_per_node(spec: str, counts: list[int]) -> None:
    assert expand_tasks_per_node(spec) == counts


def test_expand_tasks_per_node_rejects_what_it_cannot_read() -> None:
    with pytest.raises(MisconfigurationError, match=r"SLURM_TASKS_PER_NODE='2\(y3\)'"):
        expand_tasks_per_node("2(y3)")


# (scenario, is it a task of SLURM's ranks?) — see the table in ddpkit.plugins.environments._slurm
DETECTION = {
    "srun_ntasks2": True,
    "srun_bash_c": True,  # job name "bash": a wrapped launch, still srun's tasks
    "salloc_srun": True,  # job name "interactive": srun inside salloc, still srun's tasks
    "two_nodes_1x2": True,
    "two_nodes_n3": True,
    "two_nodes_n4": True,
    "srun_pty": False,  # an interactive shell: one task
    "srun_ntasks1": False,
    "sbatch_batch": False,  # the batch script: SLURM_PROCID=0, SLURM_NTASKS=2, no step
    "sbatch_two_nodes_batch": False,
    "salloc_shell": False,
}


def test_every_captured_scenario_has_an_expectation() -> None:
    assert {name for name, _ in scenarios("slurm")} == set(DETECTION)


@pytest.mark.parametrize(("scenario", "rank"), scenarios("slurm"))
def test_detection_on_real_variables(scenario: str, rank: str) -> None:
    env = slurm(scenario, rank)
    assert SLURMEnvironment.detect(env) is DETECTION[scenario]
    # Whatever SLURM's processes are not, ddpkit says why in the plan.
    assert (slurm_local_reason(env) is None) is DETECTION[scenario]


@pytest.mark.parametrize("rank", ["0", "1"])
def test_srun_ntasks2_ranks_address_and_port(rank: str) -> None:
    env = slurm("srun_ntasks2", rank)
    plan = resolve(Flags.of(accelerator="cpu", devices=2), make_probe(env=env))
    assert (plan.environment.value, plan.launcher.value) == ("slurm", "external")
    assert plan.training_type.value == "ddp"
    assert "SLURM_STEP_NUM_TASKS=2" in plan.environment.reason
    s = SLURMEnvironment(env)
    assert s.global_rank() == int(rank) == s.local_rank()
    assert (s.node_rank(), s.world_size()) == (0, 2)
    assert s.main_address() == "vm"
    assert s.main_port() == 15000 + int(env["SLURM_JOB_ID"]) % 10000


@pytest.mark.parametrize(
    "flags",
    [
        {"accelerator": "ddp_cpu", "num_processes": 2},
        {"accelerator": "cpu", "devices": 2, "strategy": "ddp_spawn"},
        {"accelerator": "cpu", "devices": 2, "strategy": "ddp"},
    ],
)
def test_under_srun_every_spelling_is_ddp_with_nothing_launched(flags: dict[str, object]) -> None:
    plan = resolve(Flags.of(**flags), make_probe(env=slurm("salloc_srun", "1")))
    assert (plan.environment.value, plan.training_type.value) == ("slurm", "ddp")
    assert plan.launcher.value == "external"


def test_two_nodes_one_task_each() -> None:
    for rank in ("0", "1"):
        env = slurm("two_nodes_1x2", rank)
        plan = resolve(Flags.of(accelerator="cpu", devices=1, num_nodes=2), make_probe(env=env))
        assert plan.environment.value == "slurm"
        s = SLURMEnvironment(env)
        assert (s.global_rank(), s.node_rank(), s.local_rank()) == (int(rank), int(rank), 0)
        assert s.main_address() == "dkn1"  # first host of dkn[1-2]
        assert s.tasks_per_node() == [1, 1] and s.num_nodes() == 2


def test_two_nodes_two_tasks_each() -> None:
    ranks = []
    for rank in ("0", "1", "2", "3"):
        env = slurm("two_nodes_n4", rank)
        resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2), make_probe(env=env))
        s = SLURMEnvironment(env)
        ranks.append((s.global_rank(), s.node_rank(), s.local_rank()))
    assert ranks == [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)]


def test_task_count_mismatch_shows_the_arithmetic() -> None:
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=1), make_probe(env=slurm("srun_ntasks2")))
    message = str(err.value)
    assert message.startswith("Trainer(accelerator='cpu', devices=1): ")
    assert "devices(1) × num_nodes(1) = 1, but srun started SLURM_STEP_NUM_TASKS=2 tasks" in message
    assert "`srun --nodes=1 --ntasks-per-node=1`" in message
    assert "(or pass devices=2, num_nodes=1 to match srun)" in message


def test_one_task_per_node_for_two_devices_per_node_is_an_error() -> None:
    # srun -N2 --ntasks-per-node=1 with devices=2: each task must not start ranks of its own.
    env = slurm("two_nodes_1x2", "1")
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2), make_probe(env=env))
    assert "devices(2) × num_nodes(2) = 4, but srun started SLURM_STEP_NUM_TASKS=2" in str(
        err.value
    )
    assert "(or pass devices=1, num_nodes=2 to match srun)" in str(err.value)


def test_node_count_mismatch() -> None:
    env = slurm("two_nodes_1x2", "0")
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=2), make_probe(env=env))
    message = str(err.value)
    assert "num_nodes=1, but srun spread its 2 tasks over SLURM_NNODES=2 nodes" in message
    assert "(or pass devices=1, num_nodes=2 to match srun)" in message


def test_uneven_tasks_per_node() -> None:
    # A real two-node step of 4 tasks, as srun would place it with a node short of CPUs.
    env = slurm("two_nodes_n4", "0") | {"SLURM_STEP_TASKS_PER_NODE": "3,1"}
    with pytest.raises(MisconfigurationError) as err:
        resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2), make_probe(env=env))
    message = str(err.value)
    assert "devices=2 processes on each node, but srun placed 3 + 1 = 4 tasks" in message
    assert "SLURM_TASKS_PER_NODE=3,1" in message
    assert "`srun --nodes=2 --ntasks-per-node=2`" in message


def test_three_tasks_on_two_nodes_cannot_match_any_devices() -> None:
    env = slurm("two_nodes_n3", "2")
    with pytest.raises(
        MisconfigurationError, match=r"= 4, but srun started SLURM_STEP_NUM_TASKS=3"
    ):
        resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2), make_probe(env=env))


def test_master_variables_override_nodelist_and_job_id() -> None:
    env = slurm("srun_ntasks2") | {"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29400"}
    s = SLURMEnvironment(env)
    assert (s.main_address(), s.main_port()) == ("10.0.0.7", 29400)


def test_batch_step_runs_locally_and_warns() -> None:
    env = slurm("sbatch_batch")
    plan = resolve(Flags.of(accelerator="cpu", devices=2), make_probe(env=env))
    assert (plan.environment.value, plan.launcher.value) == ("local", "subprocess")
    assert "batch step" in plan.environment.reason
    assert "SLURM_NTASKS=2 but no SLURM_STEP_ID" in plan.environment.reason
    [warning] = [w for w in plan.warnings if "srun" in w.message]
    assert not warning.deprecation
    assert warning.message.startswith("Trainer(accelerator='cpu', devices=2) runs in SLURM job")
    assert "SLURM_NTASKS=2 tasks, but srun did not start this process" in warning.message
    assert "ddpkit starts its 2 ranks on this node itself" in warning.message


@pytest.mark.parametrize("scenario", ["srun_ntasks1", "srun_pty"])
def test_one_task_step_starts_its_own_ranks_without_warning(scenario: str) -> None:
    plan = resolve(Flags.of(accelerator="cpu", devices=2), make_probe(env=slurm(scenario)))
    assert (plan.environment.value, plan.launcher.value) == ("local", "subprocess")
    assert "srun started this process alone" in plan.environment.reason
    assert plan.warnings == ()


def test_no_srun_warning_for_a_one_task_allocation() -> None:
    env = slurm("sbatch_batch") | {"SLURM_NTASKS": "1"}
    assert srun_warning("Trainer()", env, 2) is None
    assert srun_warning("Trainer()", {}, 2) is None


def test_environment_pickles_with_its_variables() -> None:
    s = SLURMEnvironment(make_probe(env=slurm("srun_ntasks2", "1")).env)
    copy = pickle.loads(pickle.dumps(s))
    assert copy.global_rank() == 1 and copy.main_address() == "vm"
