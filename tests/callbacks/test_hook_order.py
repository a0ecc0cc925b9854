"""Every hook fires in Lightning's order: the same recording callback and module, run by real
Lightning 2.x and by ddpkit, record the same sequence (one process here; tests/integration has
the 2-rank runs)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit.callbacks import Callback

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

CALLBACK_HOOKS = sorted(
    n for n in dir(pl.Callback) if n.startswith("on_") or n in ("setup", "teardown")
)
# The module hooks both libraries call (Lightning's ModelHooks, DataHooks and CheckpointHooks,
# the optimization hooks, and the loader hooks).
MODULE_HOOKS = [
    *(
        n
        for n in CALLBACK_HOOKS
        if n not in ("on_exception", "on_sanity_check_start", "on_sanity_check_end")
    ),
    "on_validation_model_zero_grad",
    "on_validation_model_eval",
    "on_validation_model_train",
    "on_test_model_eval",
    "on_test_model_train",
    "on_predict_model_eval",
    "configure_model",
    "prepare_data",
    "configure_callbacks",
    "optimizer_step",
    "optimizer_zero_grad",
    "lr_scheduler_step",
    "configure_gradient_clipping",
    "backward",
]
MODULE_HOOKS = sorted(set(MODULE_HOOKS))
LOADERS = ["train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"]


def recording_callback(base: type, log: list[str]) -> type:
    def make(name: str) -> Callable[..., Any]:
        def hook(self: Any, *args: Any, **kwargs: Any) -> Any:
            log.append(f"Callback.{name}")
            return getattr(base, name)(self, *args, **kwargs)

        return hook

    return type("Recording", (base,), {name: make(name) for name in CALLBACK_HOOKS})


def recording_module(base: type, log: list[str]) -> type:
    """The same module for both libraries; every hook records its name, then does what the
    base class does."""

    class Recorded(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = nn.Linear(2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            log.append("training_step")
            x, y = batch
            loss = F.mse_loss(self(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            log.append("validation_step")
            x, y = batch
            self.log("val_loss", F.mse_loss(self(x), y))

        def test_step(self, batch: Any, batch_idx: int) -> None:
            log.append("test_step")
            x, y = batch
            self.log("test_loss", F.mse_loss(self(x), y))

        def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            log.append("predict_step")
            return self(batch[0])

        def configure_optimizers(self) -> Any:
            log.append("configure_optimizers")
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1)]

    def make(name: str) -> Callable[..., Any]:
        def hook(self: Any, *args: Any, **kwargs: Any) -> Any:
            log.append(name)
            return getattr(base, name)(self, *args, **kwargs)

        return hook

    def loader(name: str) -> Callable[..., Any]:
        def hook(self: Any) -> DataLoader[Any]:
            log.append(name)
            g = torch.Generator().manual_seed(0)
            x = torch.randn(12, 2, generator=g)
            return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)

        return hook

    for name in MODULE_HOOKS:
        setattr(Recorded, name, make(name))
    for name in LOADERS:
        setattr(Recorded, name, loader(name))
    return Recorded


def run(kind: str, root: Path, calls: list[str], watch: bool = False, **options: Any) -> list[str]:
    """``watch``: a ModelCheckpoint (top 2 and last) and an EarlyStopping on val_loss too, of
    each library's own kind; ``calls`` may end with "resume": a new trainer's fit from last."""
    log: list[str] = []
    lib: Any = pl if kind == "lightning" else ddpkit
    watchers = lambda: (  # noqa: E731
        [
            lib.callbacks.ModelCheckpoint(
                dirpath=root / kind / "ckpt", monitor="val_loss", save_top_k=2, save_last=True
            ),
            lib.callbacks.EarlyStopping("val_loss", patience=5),
        ]
        if watch
        else []
    )
    common = {
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_checkpointing": watch,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "default_root_dir": root / kind,
        **options,
    }
    base = (pl.Callback, pl.LightningModule) if kind == "lightning" else (Callback, ddpkit.Module)
    make_trainer = lambda: lib.Trainer(  # noqa: E731
        callbacks=[recording_callback(base[0], log)(), *watchers()], **common
    )
    trainer = make_trainer()
    model = recording_module(base[1], log)()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about workers and batch sizes
        for call in calls:
            log.append(f"--- trainer.{call}")
            if call == "resume":
                last = trainer.checkpoint_callback.last_model_path
                trainer = make_trainer()
                trainer.fit(model, ckpt_path=last)
            else:
                getattr(trainer, call)(model)
    return log


CASES = {
    "every stage": (
        {"max_epochs": 2, "limit_val_batches": 2},
        ["fit", "validate", "test", "predict"],
    ),
    "accumulation": (
        {"max_epochs": 1, "accumulate_grad_batches": 2, "num_sanity_val_steps": 0},
        ["fit"],
    ),
    "validation every batch": (
        {"max_epochs": 1, "val_check_interval": 1, "limit_val_batches": 1},
        ["fit"],
    ),
    "max_steps mid-epoch": ({"max_epochs": 5, "max_steps": 4, "limit_val_batches": 1}, ["fit"]),
    "validation every 2nd epoch": (
        {"max_epochs": 3, "check_val_every_n_epoch": 2, "num_sanity_val_steps": 0},
        ["fit"],
    ),
    "no validation": ({"max_epochs": 1, "limit_val_batches": 0}, ["fit"]),
    "no training": ({"max_epochs": 1, "limit_train_batches": 0}, ["fit"]),
    "checkpoints, early stopping and a resume": (
        {"max_epochs": 2, "limit_val_batches": 1, "watch": True},
        ["fit", "resume", "test"],
    ),
    "checkpoints after mid-epoch validation": (
        {"max_epochs": 1, "val_check_interval": 0.5, "limit_val_batches": 1, "watch": True},
        ["fit"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_hooks_fire_in_lightnings_order(tmp_path: Path, case: str) -> None:
    options, calls = CASES[case]
    expected = run("lightning", tmp_path, calls, **options)
    assert run("ddpkit", tmp_path, calls, **options) == expected
    assert len(expected) > 10 * len(calls)  # the recording really ran
    if options.get("watch"):
        assert "Callback.on_save_checkpoint" in expected


def test_the_recording_covers_every_hook_of_a_fit(tmp_path: Path) -> None:
    """The comparison above is not vacuous: the fit calls every callback hook of training and
    validation, and the optimization hooks."""
    log = run("ddpkit", tmp_path, ["fit"], max_epochs=1, limit_val_batches=1)
    called = {entry.removeprefix("Callback.") for entry in log}
    for name in (
        "setup",
        "on_fit_start",
        "on_sanity_check_start",
        "on_train_batch_start",
        "on_before_zero_grad",
        "on_before_backward",
        "on_after_backward",
        "on_before_optimizer_step",
        "on_train_batch_end",
        "on_validation_batch_end",
        "on_train_epoch_end",
        "lr_scheduler_step",
        "on_fit_end",
        "teardown",
    ):
        assert name in called, name
