"""``Trainer(max_restarts=N)``: checked before any rank starts, and what it adds to the fit."""

from __future__ import annotations

import pytest

from ddpkit import Trainer
from ddpkit.errors import MisconfigurationError
from ddpkit.trainer._fit_port import KeptCheckpoint

TORCHRUN = {
    "RANK": "0",
    "LOCAL_RANK": "0",
    "WORLD_SIZE": "2",
    "GROUP_RANK": "0",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
}


@pytest.mark.parametrize("value", [-1, 1.5, "2", True])
def test_a_count_that_is_not_an_int_from_zero_is_refused(value: object) -> None:
    with pytest.raises(MisconfigurationError, match=r"^Trainer\(max_restarts=.*\): .*≥ 0"):
        Trainer(max_restarts=value, accelerator="cpu", devices=2, strategy="ddp")  # type: ignore[arg-type]


def test_one_process_has_nothing_to_restart() -> None:
    with pytest.raises(
        MisconfigurationError, match=r"^Trainer\(max_restarts=1\): this run is one process"
    ):
        Trainer(max_restarts=1)


def test_ranks_torchrun_started_are_torchruns_to_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in TORCHRUN.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(
        MisconfigurationError,
        match=r"^Trainer\(max_restarts=2\): the ranks were started by torchelastic .*"
        r"torchrun --max-restarts 2",
    ):
        Trainer(max_restarts=2, accelerator="cpu", devices=2, strategy="ddp")
    Trainer(accelerator="cpu", devices=2, strategy="ddp")  # it resumes by itself: nothing to ask


def test_several_machines_are_left_to_torchrun() -> None:
    with pytest.raises(MisconfigurationError, match=r"num_nodes=2: .*torchrun --nnodes=2"):
        Trainer(max_restarts=1, accelerator="cpu", devices=2, strategy="ddp", num_nodes=2)


def test_without_a_model_checkpoint_ddpkit_keeps_its_own() -> None:
    both = {"accelerator": "cpu", "devices": 2, "strategy": "ddp_spawn"}
    kept = Trainer(max_restarts=1, enable_checkpointing=False, **both)
    assert [type(cb) for cb in kept.callbacks if isinstance(cb, KeptCheckpoint)] == [KeptCheckpoint]
    assert not any(
        isinstance(cb, KeptCheckpoint) for cb in Trainer(max_restarts=1, **both).callbacks
    )
    assert not any(
        isinstance(cb, KeptCheckpoint)
        for cb in Trainer(enable_checkpointing=False, **both).callbacks
    )
