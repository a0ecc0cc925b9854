"""Lightning 1.x's automatic optimization with several optimizers, on Lightning 2.x's manual
optimization: the 1.x GAN on two CPU ranks ends with the weights of the same GAN written for 2.x
with manual optimization (same seed), on both 1.x flag sets; and, in one process, 1.x's
frequencies, schedulers, hooks and epoch outputs, and the refusals before any rank starts."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

import torch  # noqa: E402
from lightning_scripts import run_lightning_script  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from ddpkit import DDPKitDeprecationWarning, MisconfigurationError  # noqa: E402
from ddpkit.lightning import Trainer  # noqa: E402


def run_gan(out: Path, *args: str) -> dict[str, Any]:
    return run_lightning_script("lit_gan.py", out, *args)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_gan(tmp_path_factory.mktemp("gan-2x") / "run", "--gan", "2x")


@pytest.mark.xdist_group("gan-reference")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("call", ["ddp_cpu", "unused_false"])
def test_a_1x_gan_trains_as_the_2x_manual_gan(
    call: str, tmp_path: Path, reference: dict[str, Any]
) -> None:
    out = tmp_path / "run"
    ours = run_gan(out, "--gan", "1x", "--call", call)
    assert sorted(ours["state"]) == sorted(reference["state"])  # BatchNorm's buffers included
    for name, value in reference["state"].items():
        assert torch.equal(ours["state"][name], value), name
    assert ours["automatic_optimization"] is True  # the module is put back after fit
    if call == "unused_false":  # subprocess launcher: this process was rank 0
        # 1.x counted a batch as one step (2.x's manual GAN: one per optimizer step).
        assert ours["global_step"] == 2 * 6 and reference["global_step"] == 2 * 2 * 6
        # training_epoch_end: outputs[batch][optimizer_idx] (1.6–1.9), the loss detached.
        assert ours["epoch_outputs"] == [[[(["loss"], False), (["batch", "loss"], False)]] * 6] * 2
        said = (out / "fit_warnings.txt").read_text()
        assert "ddpkit runs this fit with find_unused_parameters=True" in said


class Two(pl.LightningModule):
    """A 1.x module with two optimizers, recording what ran."""

    def __init__(self, frequencies: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(2, 1), nn.Linear(2, 1)
        self.frequencies = frequencies
        self.ran: list[int] = []
        self.steps: list[tuple[int, int, bool]] = []

    def training_step(self, batch: Any, batch_idx: int, optimizer_idx: int) -> torch.Tensor:
        self.ran.append(optimizer_idx)
        layer = self.a if optimizer_idx == 0 else self.b
        return layer(batch[0]).pow(2).mean()

    def configure_optimizers(self) -> Any:
        opt_a = torch.optim.SGD(self.a.parameters(), lr=0.1)
        opt_b = torch.optim.SGD(self.b.parameters(), lr=0.1)
        step = torch.optim.lr_scheduler.StepLR(opt_a, step_size=1, gamma=0.5)
        every_2 = {
            "scheduler": torch.optim.lr_scheduler.StepLR(opt_b, step_size=1, gamma=0.5),
            "interval": "step",
            "frequency": 2,
        }
        if self.frequencies is None:
            return [opt_a, opt_b], [step, every_2]
        each_batch = torch.optim.lr_scheduler.StepLR(opt_b, step_size=1, gamma=0.5)
        return (
            {"optimizer": opt_a, "frequency": self.frequencies[0], "lr_scheduler": step},
            {
                "optimizer": opt_b,
                "frequency": self.frequencies[1],
                "lr_scheduler": {"scheduler": each_batch, "interval": "step"},
            },
        )

    def optimizer_step(self, epoch: int, batch_idx: int, optimizer: Any, optimizer_idx: int,
                       optimizer_closure: Any = None, on_tpu: bool = False,
                       using_native_amp: bool = False, using_lbfgs: bool = False) -> None:  # fmt: skip
        self.steps.append((batch_idx, optimizer_idx, using_lbfgs))
        optimizer.step(closure=optimizer_closure)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(torch.ones(12, 2)), batch_size=2)


def fit(model: pl.LightningModule, tmp_path: Path, **kwargs: Any) -> Trainer:
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False,
                      default_root_dir=tmp_path, **kwargs)  # fmt: skip
    trainer.fit(model)
    return trainer


def test_each_optimizer_steps_once_a_batch_with_1x_hooks_and_schedulers(tmp_path: Path) -> None:
    model = Two()
    trainer = fit(model, tmp_path, max_epochs=2)
    assert model.ran == [0, 1] * 12
    assert model.steps == [(i, o, False) for _ in range(2) for i in range(6) for o in (0, 1)]
    assert trainer.global_step == 12  # 1.x: a batch is a step
    opt_a, opt_b = trainer.optimizers
    assert opt_a.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**2)  # every epoch
    assert opt_b.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**6)  # every 2nd batch
    assert model.automatic_optimization and "training_step" not in vars(model)


def test_frequencies_cycle_the_optimizers_as_1x_did(tmp_path: Path) -> None:
    model = Two(frequencies=(1, 2))
    trainer = fit(model, tmp_path, max_epochs=1)
    assert model.ran == [0, 1, 1, 0, 1, 1]
    assert trainer.global_step == 6


def test_with_frequencies_a_scheduler_steps_only_where_its_optimizer_is_active(
    tmp_path: Path,
) -> None:
    """1.x's update_lr_schedulers: only the active optimizers' schedulers step, active at the
    batch index counted across epochs (its training counts within the epoch)."""
    model = Two(frequencies=(1, 2))
    trainer = fit(model, tmp_path, max_epochs=2, limit_train_batches=4)
    assert model.ran == [0, 1, 1, 0] * 2
    across = range(8)  # the batches of both epochs, counted on
    b_steps = sum(1 for i in across if i % 3 != 0)  # b is active at 1, 2 of every 3
    a_epoch_steps = sum(1 for last in (3, 7) if last % 3 == 0)  # a active at an epoch's end
    opt_a, opt_b = trainer.optimizers
    assert (b_steps, a_epoch_steps) == (5, 1)
    assert opt_b.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**b_steps)
    assert opt_a.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**a_epoch_steps)


@pytest.mark.xfail(
    strict=True,
    reason="unsettled: this hand-written expectation (the rate after each step's scheduler step) "
    "and the code (the rate before it) disagree by a step; the reference is 1.9.5, which "
    "test_twin_1x's gan_sched x lrmon cases compare (DDPKIT_ALL_TWINS=1)",
)
def test_learning_rate_monitor_logs_a_step_schedulers_rate_at_every_step(tmp_path: Path) -> None:
    """1.9.5's LearningRateMonitor under a 1.x GAN's schedulers: the step-interval one's rate at
    every step, the epoch one's at every epoch (each scheduler keeps its interval)."""
    from pytorch_lightning.callbacks import LearningRateMonitor
    from pytorch_lightning.loggers import CSVLogger

    monitor = LearningRateMonitor()
    trainer = Trainer(accelerator="cpu", devices=1, max_epochs=2, limit_train_batches=3,
                      logger=CSVLogger(tmp_path), log_every_n_steps=1, callbacks=[monitor],
                      enable_progress_bar=False, enable_model_summary=False,
                      enable_checkpointing=False)  # fmt: skip
    trainer.fit(Two())
    assert [c.interval for c in trainer.lr_scheduler_configs] == ["epoch", "step"]
    assert monitor.lrs["lr-SGD"] == pytest.approx([0.1, 0.05])  # an epoch scheduler
    # every step, halved every second batch counted across epochs (frequency 2)
    assert monitor.lrs["lr-SGD-1"] == pytest.approx([0.1 * 0.5 ** ((i + 1) // 2) for i in range(6)])


def test_gradient_clipping_goes_through_the_1x_hook(tmp_path: Path) -> None:
    seen: list[tuple[int, float]] = []

    class Clipped(Two):
        def configure_gradient_clipping(self, optimizer: Any, optimizer_idx: int,
                                        gradient_clip_val: Any = None,
                                        gradient_clip_algorithm: Any = None) -> None:  # fmt: skip
            seen.append((optimizer_idx, gradient_clip_val))
            self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    trainer = fit(Clipped(), tmp_path, max_steps=2, gradient_clip_val=0.25)
    assert seen == [(0, 0.25), (1, 0.25)] * 2
    assert trainer.gradient_clip_val == 0.25  # put back after fit


def test_accumulation_is_refused_before_training(tmp_path: Path) -> None:
    model = Two()
    with pytest.raises(
        MisconfigurationError,
        match=r"^Trainer\(accumulate_grad_batches=\.\.\.\) with Two\.training_step\(batch, "
        r"batch_idx, optimizer_idx\): .* Fix: drop accumulate_grad_batches",
    ):
        fit(model, tmp_path, max_steps=2, accumulate_grad_batches=2)
    assert model.ran == []


def test_find_unused_parameters_false_is_named_when_it_is_overridden() -> None:
    from ddpkit.lightning._multi_optimizer import multi_optimizer_stage

    with pytest.warns(DDPKitDeprecationWarning, match="1.x device flags"):
        trainer = Trainer(num_processes=2, plugins=["ddp_find_unused_parameters_false"],
                          logger=False)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with multi_optimizer_stage(trainer, Two()):
            assert trainer.strategy._ddp_kwargs["find_unused_parameters"] is True
    assert any("find_unused_parameters=True, 1.x's default" in str(w.message) for w in caught)
    assert trainer.strategy._ddp_kwargs.get("find_unused_parameters", False) is False


class _ClassRefuses(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.g, self.d = nn.Linear(2, 2), nn.Linear(2, 1)

    def training_step(self, batch: Any, batch_idx: int, optimizer_idx: int) -> torch.Tensor:
        return (self.g if optimizer_idx == 0 else self.d)(batch[0]).sum()

    def configure_optimizers(self) -> Any:
        raise AssertionError("the configure_optimizers assigned on the instance is the one")


def test_a_configure_optimizers_assigned_on_the_instance_is_the_one_used(tmp_path: Path) -> None:
    """1.x called model.configure_optimizers(), the instance's when it had one (LightningCLI's
    add_configure_optimizers_method_to_model assigns one); it is kept after the fit."""
    model = _ClassRefuses()

    def own() -> list[torch.optim.Optimizer]:
        return [
            torch.optim.SGD(model.g.parameters(), lr=0.1),
            torch.optim.Adam(model.d.parameters()),
        ]

    model.configure_optimizers = own  # type: ignore[method-assign]
    trainer = Trainer(max_steps=2, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, default_root_dir=tmp_path)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DDPKitDeprecationWarning)  # 1.x's spelling: not tested here
        trainer.fit(model, DataLoader(TensorDataset(torch.ones(4, 2)), batch_size=2))
    assert [type(o).__name__ for o in trainer.optimizers] == ["SGD", "Adam"]
    assert model.configure_optimizers is own
