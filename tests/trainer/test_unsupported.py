"""What Lightning runs and ddpkit's own loop does not is refused with the fix — not a raw error
in the middle of a fit: several loaders a stage, an optimizer that steps through a closure
(LBFGS), a torchmetrics ``Metric`` given to ``self.log``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import MisconfigurationError


def loader() -> DataLoader[Any]:
    x = torch.randn(8, 2, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)


class Net(ddpkit.Module):
    def __init__(self, optimizer: str = "sgd", log: Any = None) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.optimizer, self.logged = optimizer, log
        self.validated = 0

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.logged is not None:
            self.log("metric", self.logged)
        return F.mse_loss(self.layer(batch[0]), batch[1])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.validated += 1

    def configure_optimizers(self) -> Any:
        if self.optimizer == "lbfgs":
            return torch.optim.LBFGS(self.parameters(), lr=0.1)
        return torch.optim.SGD(self.parameters(), lr=0.1)


def trainer(tmp_path: Path) -> ddpkit.Trainer:
    return ddpkit.Trainer(
        accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize("several", [list, tuple])
def test_several_validation_loaders_are_refused_before_the_fit(
    several: type, tmp_path: Path
) -> None:
    model = Net()
    with pytest.raises(MisconfigurationError, match=r"2 loaders in a (list|tuple).*ConcatDataset"):
        trainer(tmp_path).fit(model, loader(), several([loader(), loader()]))
    assert model.validated == 0


def test_several_loaders_from_a_hook_are_refused_naming_it(tmp_path: Path) -> None:
    class FromHook(Net):
        def val_dataloader(self) -> Any:
            return {"a": loader(), "b": loader()}

    with pytest.raises(MisconfigurationError, match=r"FromHook\.val_dataloader\(\) returned 2"):
        trainer(tmp_path).fit(FromHook(), loader())


def test_an_optimizer_that_steps_through_a_closure_is_refused(tmp_path: Path) -> None:
    model = Net(optimizer="lbfgs")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(MisconfigurationError, match=r"LBFGS.*closure.*ddpkit\.lightning\.Trainer"):
        trainer(tmp_path).fit(model, loader())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_a_torchmetrics_metric_given_to_self_log_is_refused_with_the_fix(tmp_path: Path) -> None:
    torchmetrics = pytest.importorskip("torchmetrics")
    metric = torchmetrics.MeanMetric()
    with pytest.raises(MisconfigurationError, match=r"<MeanMetric>.*metric\.compute\(\)"):
        trainer(tmp_path).fit(Net(log=metric), loader())


def _steps(self: Any, batch: Any, batch_idx: int, dataloader_idx: int) -> None:
    raise AssertionError("a hook that requires dataloader_idx ran")


@pytest.mark.parametrize(
    ("owner", "hook"),
    [("module", "validation_step"), ("module", "on_train_batch_end"),
     ("callback", "on_validation_batch_end"), ("callback", "on_train_batch_start")],
)  # fmt: skip
def test_a_hook_that_requires_dataloader_idx_is_refused_before_the_fit(
    owner: str, hook: str, tmp_path: Path
) -> None:
    # Lightning 2.x raises this RuntimeError at its evaluation loop's start (one loader a stage,
    # ddpkit's only case); a training batch hook would get a TypeError at its first call.
    model, callbacks = Net(), []
    if owner == "module":
        model = type("Indexed", (Net,), {hook: _steps})()
    else:
        callbacks = [type("Indexed", (ddpkit.callbacks.Callback,), {hook: _steps})()]
    run = trainer(tmp_path)
    run.callbacks.extend(callbacks)
    with pytest.raises(RuntimeError, match=rf"`dataloader_idx` in `Indexed\.{hook}\(\)`.*=0"):
        run.fit(model, loader(), loader())
    assert run.global_step == 0 and model.validated == 0


def test_a_hook_whose_dataloader_idx_has_a_default_runs(tmp_path: Path) -> None:
    class Defaulted(Net):
        def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            self.validated += 1

    model = Defaulted()
    trainer(tmp_path).fit(model, loader(), loader())
    assert model.validated == 2 + 2  # the sanity check's two batches, then the epoch's
