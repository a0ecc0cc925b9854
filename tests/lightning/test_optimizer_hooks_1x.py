"""A one-optimizer 1.x module that overrides the optimization hooks with 1.x's signatures — the
learning-rate warm-up of 1.x's docs in ``optimizer_step(epoch, batch_idx, optimizer,
optimizer_idx, optimizer_closure, on_tpu, using_native_amp, using_lbfgs)``, 1.x's
``optimizer_zero_grad`` and ``configure_gradient_clipping`` — trains on ``ddpkit.lightning.Trainer``
and on ``ddpkit.Trainer`` as the same module with 2.x's signatures does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit

pl = pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")

from ddpkit.lightning import Trainer as LightningTrainer  # noqa: E402


def module(base: type, one_x: bool) -> Any:
    class WarmUp(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = torch.nn.Linear(4, 1)
            self.calls: list[tuple[str, Any]] = []

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return F.mse_loss(self.layer(batch[0]), batch[1])

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

        def warm_up(self, optimizer: Any, closure: Any) -> None:
            scale = min(1.0, (self.trainer.global_step + 1) / 4)
            for group in optimizer.param_groups:
                group["lr"] = scale * 0.1
            optimizer.step(closure=closure)

        def clip(self, optimizer: Any, value: Any, algorithm: Any) -> None:
            self.clip_gradients(optimizer, gradient_clip_val=value,
                                gradient_clip_algorithm=algorithm)  # fmt: skip

    if one_x:

        class OneX(WarmUp):
            def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_idx,  # type: ignore[no-untyped-def, override]
                               optimizer_closure, on_tpu, using_native_amp, using_lbfgs):  # fmt: skip
                self.calls.append(("step", (optimizer_idx, on_tpu, using_native_amp, using_lbfgs)))
                self.warm_up(optimizer, optimizer_closure)

            def optimizer_zero_grad(self, epoch, batch_idx, optimizer, optimizer_idx):  # type: ignore[no-untyped-def, override]
                self.calls.append(("zero_grad", optimizer_idx))
                optimizer.zero_grad()

            def configure_gradient_clipping(  # type: ignore[no-untyped-def, override]
                self, optimizer, optimizer_idx, gradient_clip_val=None,
                gradient_clip_algorithm=None,
            ):  # fmt: skip
                self.calls.append(("clip", optimizer_idx))
                self.clip(optimizer, gradient_clip_val, gradient_clip_algorithm)

        return OneX()

    class TwoX(WarmUp):
        def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):  # type: ignore[no-untyped-def, override]
            self.warm_up(optimizer, optimizer_closure)

    return TwoX()


def fit(kind: str, one_x: bool, tmp_path: Path) -> Any:
    x = torch.randn(24, 4, generator=torch.Generator().manual_seed(1))
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    lib: Any = LightningTrainer if kind == "lightning" else ddpkit.Trainer
    base = pl.LightningModule if kind == "lightning" else ddpkit.Module
    trainer = lib(
        accelerator="cpu", devices=1, max_epochs=2, gradient_clip_val=0.5, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=tmp_path / f"{kind}-{one_x}",
    )  # fmt: skip
    model = module(base, one_x)
    trainer.fit(model, data)
    return model


@pytest.mark.parametrize("kind", ["lightning", "ddpkit"])
def test_1x_optimization_hooks_train_as_their_2x_spelling(kind: str, tmp_path: Path) -> None:
    ours = fit(kind, True, tmp_path)
    theirs = fit(kind, False, tmp_path)
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, msg=name)
    steps = [args for what, args in ours.calls if what == "step"]
    assert steps == [(0, False, False, False)] * 12  # 6 batches, 2 epochs: 1.x's arguments
    assert [args for what, args in ours.calls if what in ("zero_grad", "clip")] == [0] * 24
    assert "optimizer_step" not in vars(ours)  # the stage's adapter is gone after it
