"""The Lightning 1.x hooks that 2.0 removed, on ``ddpkit.Trainer``: each is called where 1.x
called it (the step and epoch ends) or refused before the run, never defined and silently left
uncalled. The reference for which hooks 2.x removed is the 1.x wheels' members
(``facts_1x.json``, through its table) against the installed Lightning 2.x's (``facts_2x.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit._compat_1x.hooks import CALLED_BY_DDPKIT_TRAINER, COMMON_NAMES, INSTEAD, REMOVED
from ddpkit.callbacks import Callback
from ddpkit.errors import MisconfigurationError

_SRC = Path(ddpkit.__file__).parent
_TABLE_1X = json.loads((_SRC / "lightning/_surface/surface_1x.json").read_text())
_FACTS_2X = json.loads((_SRC / "_lightning_surface/facts_2x.json").read_text())


def _removed_per_wheels() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for key, entry in _TABLE_1X["members"].items():
        owner, _, name = key.partition(".")
        if owner == "Trainer" or entry.get("role") != "hook":
            continue
        # forward is nn.Module's in 2.x, which the 2.x facts leave out
        if name != "forward" and name not in _FACTS_2X["classes"][owner]["members"]:
            found.setdefault(owner, set()).add(name)
    return found


def test_the_table_is_every_hook_the_1x_wheels_had_and_2x_removed() -> None:
    assert {owner: set(names) for owner, names in REMOVED.items()} == _removed_per_wheels()
    assert set().union(*REMOVED.values()) <= set(INSTEAD)


class _Net(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.steps = 0

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.steps += 1
        return self.layer(batch[0]).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2)


class _Data(ddpkit.DataModule):
    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2)


def _trainer(tmp_path: Path, callbacks: list[Any]) -> ddpkit.Trainer:
    return ddpkit.Trainer(
        max_epochs=1, callbacks=callbacks, default_root_dir=tmp_path, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip


def _hook(self: Any, *args: Any, **kwargs: Any) -> None:
    raise AssertionError("a refused hook ran")


_REFUSED = [
    (owner, name)
    for owner, names in sorted(REMOVED.items())
    for name in sorted(names - CALLED_BY_DDPKIT_TRAINER - COMMON_NAMES)
]


@pytest.mark.parametrize(("owner", "name"), _REFUSED)
def test_a_removed_hook_ddpkit_never_calls_is_refused_before_the_run(
    owner: str, name: str, tmp_path: Path
) -> None:
    model, datamodule, callbacks = _Net(), None, []
    if owner == "LightningModule":
        model = type("UserNet", (_Net,), {name: _hook})()
    elif owner == "LightningDataModule":
        datamodule = type("UserData", (_Data,), {name: _hook})()
    else:
        callbacks = [type("UserCallback", (Callback,), {name: _hook})()]
    trainer = _trainer(tmp_path, callbacks)
    with pytest.raises(MisconfigurationError) as raised:
        trainer.fit(model, datamodule=datamodule)
    message = str(raised.value)
    assert message.startswith(f"User{'Net' if owner == 'LightningModule' else ''}")
    assert f".{name}: a hook of Lightning 1.x's {owner}" in message
    assert INSTEAD[name] in message and "ddpkit.lightning.Trainer" in message
    assert model.steps == 0  # refused before the first step


def test_a_common_name_is_the_users_own_method(tmp_path: Path) -> None:
    net = type("UserNet", (_Net,), {"predict": lambda self, x: self.layer(x)})()
    _trainer(tmp_path, []).fit(net)
    assert net.steps == 2


@pytest.mark.parametrize("name", sorted(CALLED_BY_DDPKIT_TRAINER & {"training_epoch_end"}))
def test_a_removed_hook_ddpkit_calls_is_called(name: str, tmp_path: Path) -> None:
    calls: list[int] = []
    net = type("UserNet", (_Net,), {name: lambda self, outputs: calls.append(len(outputs))})()
    with pytest.warns(ddpkit.errors.DDPKitDeprecationWarning, match=name):
        _trainer(tmp_path, []).fit(net)
    assert calls == [2]
