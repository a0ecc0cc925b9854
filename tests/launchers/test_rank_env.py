"""The environment ddpkit's subprocess and spawn launchers give each rank (a pure dict)."""

from __future__ import annotations

from ddpkit._runtime.launch._env import rank_env


def _env(base: dict[str, str]) -> dict[str, str]:
    return rank_env(
        base, main_address="127.0.0.1", main_port=29500, world_size=2, node_rank=0,
        local_rank=1, parent_pid=1234,
    )  # fmt: skip


def test_faulthandler_is_on_in_each_rank_unless_the_user_said_otherwise() -> None:
    # On: a rank that dies of SIGSEGV or SIGABRT prints every thread's Python stack (the
    # end-to-end proof is tests/integration/test_faults.py's crash in native code).
    assert _env({})["PYTHONFAULTHANDLER"] == "1"
    # The user's word stands, "" (off) included.
    assert _env({"PYTHONFAULTHANDLER": ""})["PYTHONFAULTHANDLER"] == ""
    assert _env({"PYTHONFAULTHANDLER": "yes"})["PYTHONFAULTHANDLER"] == "yes"


def test_the_rank_variables_are_set_and_the_base_kept() -> None:
    env = _env({"PATH": "/bin", "LOCAL_RANK": "7"})
    assert env["PATH"] == "/bin"
    assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "LOCAL_RANK")} == {
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
    }  # fmt: skip
