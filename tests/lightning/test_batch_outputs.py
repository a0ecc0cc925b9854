"""The outputs 1.x's training hooks get (``ddpkit.lightning._batch_outputs``):
``on_train_batch_end(outputs)`` and, with several optimizers, ``training_epoch_end(outputs)`` as
Lightning 1.9.5 built them — checked against 1.9.5's own functions, run in a process of their
own — and what a fit of a 1.x module hands its hooks, while a module written for Lightning 2.x
keeps 2.x's. In-process, one CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import ddpkit.lightning as dl  # noqa: E402
from ddpkit import DDPKitDeprecationWarning  # noqa: E402
from ddpkit.lightning._batch_outputs import (  # noqa: E402
    batch_end_outputs,
    epoch_end_outputs,
    is_1x_module,
)

PL19 = Path(__file__).resolve().parents[2] / ".venv" / "pl19"

#: Each batch's outputs by optimizer index (a string stands for a step's dict), and the count.
LAYOUTS: list[tuple[list[dict[int, str]], int]] = [
    ([{0: "a0", 1: "a1"}, {0: "b0", 1: "b1"}, {0: "c0", 1: "c1"}], 2),  # a GAN
    ([{0: "a0"}, {1: "b1"}, {1: "c1"}, {0: "d0"}], 2),  # "frequency": (1, 2)
    ([{0: "a0", 1: "a1"}, {0: "b0"}, {}, {1: "d1"}], 2),  # steps returning None, one batch none
    ([{0: "a0", 1: "a1"}], 2),  # one batch
    ([{1: "a1"}], 2),
    ([{}, {}], 2),
    ([], 2),
    ([{0: "a0"}, {}, {0: "c0"}], 1),  # one optimizer
    ([{0: "a0"}], 1),
    ([{0: "a0", 1: "a1", 2: "a2"}, {1: "b1"}], 3),
]

_PL19_SIDE = """
import json, sys
from types import SimpleNamespace
from pytorch_lightning.loops.epoch.training_epoch_loop import TrainingEpochLoop as Loop
module = SimpleNamespace(automatic_optimization=True)
def step(name):  # the dict a step's output was
    return {"loss": name}
found = []
for batches, count in json.loads(sys.argv[1]):
    # 1.9.5's batch loop: per batch, a list over TBPTT splits (one) of {optimizer: output},
    # or [] when no optimizer gave one
    outputs = [[{int(i): step(o) for i, o in b.items()}] if b else [] for b in batches]
    ends = [Loop._prepare_outputs_training_batch_end(o, module, count) for o in outputs]
    epoch = Loop._prepare_outputs_training_epoch_end(outputs, module, count)
    found.append({"batch_end": ends, "epoch_end": epoch})
print(json.dumps(found))
"""


def _step(name: str) -> dict[str, str]:
    return {"loss": name}


@pytest.mark.skipif(
    not (PL19 / "pytorch_lightning").is_dir(), reason="Lightning 1.9.5 is not in .venv/pl19"
)
@pytest.mark.timeout(120)
def test_the_forms_are_1_9_5s_own() -> None:
    env = {**os.environ, "PYTHONPATH": str(PL19)}
    proc = subprocess.run(
        [sys.executable, "-c", _PL19_SIDE, json.dumps(LAYOUTS)],
        capture_output=True, text=True, env=env, timeout=110,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.splitlines()[-1])
    for (batches, count), expected in zip(LAYOUTS, theirs, strict=True):
        steps = [{i: _step(o) for i, o in b.items()} for b in batches]
        # Lightning 2.x's own outputs: by optimizer index with several, the step's alone with one
        ours = [batch_end_outputs(dict(b) if count > 1 else b.get(0), count > 1) for b in steps]
        assert ours == expected["batch_end"], (batches, count)
        assert epoch_end_outputs(steps, count) == expected["epoch_end"], (batches, count)


def test_the_forms_without_1_9_5() -> None:
    """The same forms, written out: what 1.9.5 gives for three of the layouts."""
    a0, a1, b0, d1 = _step("a0"), _step("a1"), _step("b0"), _step("d1")
    batches = [{0: a0, 1: a1}, {0: b0}, {}, {1: d1}]
    assert [batch_end_outputs(b, True) for b in batches] == [[a0, a1], [b0], [], [d1]]
    assert epoch_end_outputs(batches, 2) == [[a0, a1], [b0], [d1]]
    assert epoch_end_outputs([{1: a1}], 2) == [a1]  # one batch: squeezed to its list
    assert epoch_end_outputs([{0: a0}, {}], 1) == [a0]  # one optimizer: the outputs
    assert batch_end_outputs({}, False) == [] and batch_end_outputs(a0, False) == a0


class Base(pl.LightningModule):
    """Lightning 2.x's module: a step returning None at its second batch."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(2, 1), nn.Linear(2, 1)
        self.batch_ends: list[Any] = []

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        return None if batch_idx == 1 else self.a(batch[0]).pow(2).mean()

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.batch_ends.append(_shape(outputs))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(torch.ones(6, 2)), batch_size=2)


class OneX(dl.LightningModule, Base):  # type: ignore[misc]
    """The same module written for 1.x (``pytorch_lightning.LightningModule`` ported)."""


class GAN(Base):
    """1.x's several optimizers: ``optimizer_idx``, the second's step None at batch 1."""

    def __init__(self, frequencies: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.frequencies = frequencies
        self.epoch_ends: list[Any] = []

    def training_step(self, batch: Any, batch_idx: int, optimizer_idx: int) -> Any:  # type: ignore[override]
        if batch_idx == 1 and optimizer_idx == 1:
            return None
        layer = self.a if optimizer_idx == 0 else self.b
        return {"loss": layer(batch[0]).pow(2).mean(), "idx": optimizer_idx}

    def training_epoch_end(self, outputs: Any) -> None:
        self.epoch_ends.append(_shape(outputs))

    def configure_optimizers(self) -> Any:
        opt_a = torch.optim.SGD(self.a.parameters(), lr=0.1)
        opt_b = torch.optim.SGD(self.b.parameters(), lr=0.1)
        if self.frequencies is None:
            return [opt_a, opt_b]
        return (
            {"optimizer": opt_a, "frequency": self.frequencies[0]},
            {"optimizer": opt_b, "frequency": self.frequencies[1]},
        )


def _shape(value: Any) -> Any:
    """A step output's optimizer index (``"loss"`` without one), lists kept as lists."""
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, dict):
        return value.get("idx", "loss") if value else "{}"
    return type(value).__name__


def fit(model: pl.LightningModule, tmp_path: Path) -> None:
    trainer = dl.Trainer(accelerator="cpu", devices=1, max_epochs=1, logger=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, default_root_dir=tmp_path)  # fmt: skip
    if isinstance(model, GAN):  # training_epoch_end: a 1.x hook, which warns
        with pytest.warns(DDPKitDeprecationWarning, match=r"GAN\.training_epoch_end"):
            trainer.fit(model)
    else:
        trainer.fit(model)


def test_a_1x_module_gets_1x_outputs_and_a_2x_module_2x_outputs(tmp_path: Path) -> None:
    ours, theirs = OneX(), Base()
    fit(ours, tmp_path / "1x")
    fit(theirs, tmp_path / "2x")
    assert ours.batch_ends == ["loss", [], "loss"]  # 1.9.5: [] for a step that returned None
    assert theirs.batch_ends == ["loss", "{}", "loss"]  # Lightning 2.x's own
    assert is_1x_module(ours) and not is_1x_module(theirs)
    loop = ours.trainer.fit_loop.epoch_loop
    assert "run" not in vars(loop.automatic_optimization)  # put back after the fit


def test_several_optimizers_give_lists_by_batch_then_optimizer(tmp_path: Path) -> None:
    model = GAN()
    fit(model, tmp_path)
    assert model.batch_ends == [[0, 1], [0], [0, 1]]
    assert model.epoch_ends == [[[0, 1], [0], [0, 1]]]


def test_with_frequencies_each_batch_holds_the_one_optimizer_that_ran(tmp_path: Path) -> None:
    model = GAN(frequencies=(1, 2))
    fit(model, tmp_path)
    # batch 1 is the second optimizer's, whose step returned None: nothing of it kept
    assert model.batch_ends == [[0], [], [1]]
    assert model.epoch_ends == [[[0], [1]]]
