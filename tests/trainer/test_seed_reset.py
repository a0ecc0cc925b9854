"""Every DDP rank starts a stage from ``seed_everything``'s seed, whatever the script drew before
``fit`` (Lightning's DDP strategies call ``reset_seed`` as each stage's ranks set up): the same
seed gives the same dropout masks and initial draws as under Lightning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import Trainer
from ddpkit.testing._distributed import DistInfo
from ddpkit.utilities._seed import ENV_LIGHTNING_SEED, ENV_SEED, ENV_SEED_WORKERS, reset_seed


class Draws(ddpkit.Module):
    """Notes the first number each stage draws."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.first: dict[str, float] = {}

    def on_fit_start(self) -> None:
        self.first["fit"] = torch.rand(1).item()

    def on_test_start(self) -> None:
        self.first["test"] = torch.rand(1).item()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).sum()

    def test_step(self, batch: Any, batch_idx: int) -> None:
        pass

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.distributed(world_size=2, timeout=120)
def test_each_stage_of_each_rank_starts_from_the_seed(
    dist: DistInfo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # What seed_everything(7) exports (set through monkeypatch, so the test leaks none of it).
    for name, value in ((ENV_SEED, "7"), (ENV_LIGHTNING_SEED, "7"), (ENV_SEED_WORKERS, "0")):
        monkeypatch.setenv(name, value)
    torch.manual_seed(1000 + dist.rank)
    torch.rand(3 + dist.rank)  # each rank draws differently before fit, as scripts do
    model = Draws()
    trainer = Trainer(
        accelerator="cpu", devices=2, strategy="ddp", max_epochs=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=tmp_path,
    )  # fmt: skip
    data = DataLoader(TensorDataset(torch.ones(4, 1)), batch_size=1)
    trainer.fit(model, data)
    torch.rand(5)  # drawn between the stages
    trainer.test(model, data, verbose=False)
    torch.manual_seed(7)
    expected = torch.rand(1).item()
    assert model.first == {"fit": expected, "test": expected}


def test_reset_seed_does_nothing_without_a_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_SEED, ENV_LIGHTNING_SEED, ENV_SEED_WORKERS):
        monkeypatch.delenv(name, raising=False)
    state = torch.get_rng_state()
    reset_seed()
    assert torch.equal(torch.get_rng_state(), state)
