"""Every private member of Lightning that ``ddpkit.lightning`` uses is named in one module
(``ddpkit.lightning._lightning_private``), and exists in the installed Lightning: a release that
renames one fails here, naming it and where ddpkit uses it."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

pytest.importorskip("pytorch_lightning")

from ddpkit.lightning import _lightning_private
from ddpkit.lightning._tips import quiet_tips


def _resolve(path: str) -> Any:
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):  # a class inside a module inside a package
        return _resolve(module).__dict__[name] if "." in module else None


def _instance(owner: type) -> Any:
    """A plain instance of ``owner``, for a member set in ``__init__``."""
    import pytorch_lightning as pl

    quiet_tips()  # Lightning's hint to use srun, on a machine that has one
    if issubclass(owner, pl.Trainer):
        return owner(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False)
    if owner.__name__ == "_CheckpointConnector":
        return owner(pl.Trainer(accelerator="cpu", devices=1, logger=False))
    if owner.__name__ == "_MultiProcessingLauncher":
        from pytorch_lightning.strategies import DDPStrategy

        return owner(DDPStrategy(), start_method="spawn")
    if owner.__name__ == "CSVLogger":
        return owner(".")
    return owner()


@pytest.mark.parametrize(
    ("owner", "member", "why"), _lightning_private.MEMBERS, ids=lambda v: str(v)[:40]
)
def test_each_private_member_exists(owner: str, member: str, why: str) -> None:
    cls = _resolve(owner)
    assert isinstance(cls, type), f"Lightning has no {owner} (ddpkit uses it in {why})"
    if hasattr(cls, member):
        return
    assert hasattr(_instance(cls), member), f"Lightning's {owner} has no {member}: {why}"


def test_each_imported_private_name_is_lightnings() -> None:
    for name in _lightning_private.__all__:
        if name == "MEMBERS":
            continue
        if name == "_PRECISION_INPUT":  # a type alias: typing's object under Lightning's name
            assert _lightning_private._PRECISION_INPUT.__module__ == "typing"
            continue
        assert getattr(_lightning_private, name).__module__.split(".")[0] in (
            "pytorch_lightning",
            "lightning_fabric",
        ), name
