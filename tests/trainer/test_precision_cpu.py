"""Precision on CPU: bf16-mixed autocasts, 64 converts, 16-mixed's scaler mechanics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset
from trainer_models import Recorder, loader, quiet

from ddpkit import MisconfigurationError, Trainer
from ddpkit.plugins.precision import DoublePrecisionPlugin, MixedPrecisionPlugin, PrecisionPlugin


class Inspecting(Recorder):
    """Records the dtypes of the batch, the parameters and the output in training_step."""

    def __init__(self) -> None:
        super().__init__(lr=0.05)
        self.seen: list[tuple[torch.dtype, torch.dtype, torch.dtype, torch.dtype]] = []
        self.index_dtypes: list[torch.dtype] = []

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch[:2]  # a third item, if any, holds integer indices
        if len(batch) > 2:
            self.index_dtypes.append(batch[2].dtype)
        out = self(x)
        self.seen.append((x.dtype, y.dtype, self.layer.weight.dtype, out.dtype))
        return torch.nn.functional.mse_loss(out.float(), y.float())


@pytest.mark.parametrize("flag", ["bf16-mixed", "bf16"])
def test_bf16_mixed_autocasts_on_cpu_and_trains(tmp_path: Path, flag: str) -> None:
    model = Inspecting()
    x, y = loader().dataset.tensors  # type: ignore[attr-defined]
    before = torch.nn.functional.mse_loss(model(x), y).item()
    trainer = Trainer(default_root_dir=tmp_path, precision=flag, **quiet(max_epochs=5))
    assert isinstance(trainer.precision_plugin, MixedPrecisionPlugin)
    trainer.fit(model, loader())
    # Inputs and weights stay float32; the autocast region computes in bfloat16.
    assert set(model.seen) == {(torch.float32, torch.float32, torch.float32, torch.bfloat16)}
    after = torch.nn.functional.mse_loss(model(x), y).item()
    assert after < 0.5 * before
    assert trainer.precision_plugin.state_dict() == {}  # no scaler for bfloat16


@pytest.mark.parametrize("flag", [64, "64", "64-true"])
def test_double_precision_converts_the_model_and_float_inputs(tmp_path: Path, flag: Any) -> None:
    model = Inspecting()
    data = DataLoader(
        TensorDataset(torch.randn(8, 2), torch.randn(8, 1), torch.arange(8)), batch_size=4
    )
    trainer = Trainer(default_root_dir=tmp_path, precision=flag, **quiet(max_epochs=1))
    assert isinstance(trainer.precision_plugin, DoublePrecisionPlugin)
    trainer.fit(model, data)
    assert set(model.seen) == {(torch.float64, torch.float64, torch.float64, torch.float64)}
    assert model.layer.weight.dtype == torch.float64
    assert set(model.index_dtypes) == {torch.int64}


def test_double_precision_leaves_integers_and_other_values() -> None:
    plugin = DoublePrecisionPlugin()
    batch = {"x": torch.ones(1), "n": torch.ones(1, dtype=torch.long), "s": ["a", (torch.ones(1),)]}
    out = plugin.convert_input(batch)
    assert (out["x"].dtype, out["n"].dtype, out["s"][0]) == (torch.float64, torch.long, "a")
    assert out["s"][1][0].dtype == torch.float64


def test_full_precision_is_the_default(tmp_path: Path) -> None:
    model = Inspecting()
    trainer = Trainer(default_root_dir=tmp_path, **quiet(max_steps=1))
    assert type(trainer.precision_plugin) is PrecisionPlugin
    trainer.fit(model, loader())
    assert model.seen == [(torch.float32,) * 4]


def test_16_mixed_on_cpu_names_the_cpu_alternative() -> None:
    with pytest.raises(MisconfigurationError, match=r"precision='bf16-mixed' on CPU"):
        Trainer(precision="16-mixed")


def test_an_unknown_mixed_precision() -> None:
    with pytest.raises(MisconfigurationError, match=r"Choose one of '16-mixed', 'bf16-mixed'"):
        MixedPrecisionPlugin("8-mixed")


def test_16_mixed_scales_the_loss_and_unscales_before_the_step() -> None:
    """The GradScaler mechanics, on CPU (16-mixed trains on GPUs; tests/gpu runs it there)."""
    plugin = MixedPrecisionPlugin("16-mixed")
    plugin.setup("cpu")
    weight = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([weight], lr=0.1)
    plugin.backward((weight * 3).sum())
    scale = plugin.state_dict()["scaler"]["scale"]
    assert scale > 1
    assert weight.grad is not None
    assert weight.grad.item() == pytest.approx(3 * scale)  # scaled
    plugin.unscale_gradients(opt)
    assert weight.grad.item() == pytest.approx(3.0)  # true scale, e.g. for clipping
    plugin.optimizer_step(opt)
    assert weight.item() == pytest.approx(1.0 - 0.1 * 3.0)

    restored = MixedPrecisionPlugin("16-mixed")
    restored.setup("cpu")
    restored.load_state_dict({"scaler": {**plugin.state_dict()["scaler"], "scale": 8.0}})
    assert restored.state_dict()["scaler"]["scale"] == 8.0
