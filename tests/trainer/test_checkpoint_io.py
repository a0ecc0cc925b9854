"""``atomic_save`` and ``load_checkpoint`` (the crash case, killed mid-write, is an integration
test: tests/integration/test_training_checkpoint.py)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import torch

from ddpkit import MisconfigurationError
from ddpkit.core._saving import load_checkpoint
from ddpkit.trainer._checkpoint import atomic_save


class Unpicklable:
    def __reduce__(self) -> Any:
        raise RuntimeError("cannot pickle this")


class Payload:
    """Any class: weights_only loading refuses to build it."""


def test_round_trip_into_new_folders(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "model.ckpt"
    returned = atomic_save({"state_dict": {"w": torch.arange(3)}, "epoch": 2}, target)
    assert returned == target
    data = load_checkpoint(target)
    assert torch.equal(data["state_dict"]["w"], torch.arange(3))
    assert data["epoch"] == 2
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.ckpt"]


def test_a_failed_save_keeps_the_previous_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "model.ckpt"
    atomic_save({"state_dict": {}, "epoch": 1}, target)
    with pytest.raises(RuntimeError, match="cannot pickle this"):
        atomic_save({"state_dict": {}, "epoch": 2, "bad": Unpicklable()}, target)
    assert load_checkpoint(target)["epoch"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ckpt"]


def test_loading_refuses_code_unless_the_user_opts_out(tmp_path: Path) -> None:
    target = tmp_path / "model.ckpt"
    atomic_save({"state_dict": {}, "extra": Payload()}, target)
    with pytest.raises(pickle.UnpicklingError, match="Payload"):
        load_checkpoint(target)
    assert isinstance(load_checkpoint(target, weights_only=False)["extra"], Payload)


def test_a_file_that_is_no_checkpoint(tmp_path: Path) -> None:
    target = tmp_path / "weights.pt"
    torch.save({"w": torch.ones(1)}, target)
    with pytest.raises(MisconfigurationError, match=r"weights.pt.*not a ddpkit checkpoint"):
        load_checkpoint(target)
