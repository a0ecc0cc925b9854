"""The quick tier (``scripts/test.sh --quick``): what a contributor runs between edits, in a few
minutes on 2 cores. The full suite stays the README's test command and CI's.

It holds the fast unit folders (the connector's resolution, errors, the public API, the
environments) and one real-process test per launcher, cluster environment and fault class, so an
edit that breaks any of them shows here first. Each entry is a node-id prefix; a test that
matches none is deselected. ``tests/test_quick_tier.py`` checks that every entry still names a
test, and that every launcher, environment and fault class keeps its entry."""

from __future__ import annotations

#: what each real-process entry stands for (tests/test_quick_tier.py holds them to the list)
KINDS: dict[str, tuple[str, ...]] = {
    "launcher": ("subprocess", "spawn", "fork", "torchrun", "mpirun", "srun"),
    "environment": ("torchrun", "slurm", "mpi", "lsf", "kubeflow", "notebook"),
    "fault": ("raise", "signal", "stall", "restart", "port", "restarts used up"),
}

#: node-id prefix -> the kinds it covers
QUICK: dict[str, tuple[str, ...]] = {
    # unit folders: pure functions and in-process checks
    "tests/connector/": (),
    "tests/test_errors.py": (),
    "tests/test_public_api.py": (),
    "tests/test_structure.py": (),
    "tests/test_budgets.py": (),
    "tests/plugins/environments/test_kubeflow_lsf_environments.py": ("lsf", "kubeflow"),
    # the launchers, each training two real ranks
    "tests/integration/test_training.py::test_mission_call_trains_like_hand_written_ddp": (
        "subprocess",
        "spawn",
    ),
    "tests/notebooks/test_no_script.py": ("fork", "notebook"),
    "tests/integration/test_torchrun.py::test_torchrun_two_ranks_train_together": ("torchrun",),
    "tests/integration/test_mpirun.py::test_mpirun_two_ranks_same_weights_as_subprocess_ddp": (
        "mpirun",
        "mpi",
    ),
    "tests/integration/test_slurm_cluster.py::test_srun_two_tasks_are_the_ranks": (
        "srun",
        "slurm",
    ),
    # the fault classes
    "tests/integration/test_faults.py::test_a_rank_that_raises_ends_the_job_with_its_traceback_first": (
        "raise",
    ),
    "tests/integration/test_faults.py::test_a_rank_killed_by_sigkill_is_named_with_the_signal": (
        "signal",
    ),
    "tests/integration/test_faults.py::test_a_stalled_rank_is_named_with_every_ranks_stack": (
        "stall",
    ),
    "tests/integration/test_faults.py::test_a_busy_master_port_fails_before_any_rank_starts": (
        "port",
    ),
    "tests/integration/test_restarts.py::test_a_killed_rank_restarts_and_ends_as_an_uninterrupted_run": (
        "restart",
    ),
    "tests/integration/test_restarts.py::test_restarts_used_up_fail_the_job_naming_every_attempts_root_cause": (
        "restarts used up",
    ),
}


def in_quick_tier(nodeid: str) -> bool:
    """Whether the test ``nodeid`` runs in the quick tier."""
    return any(nodeid.startswith(prefix) for prefix in QUICK)
