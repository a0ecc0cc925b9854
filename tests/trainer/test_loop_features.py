"""The loop features a Lightning user expects, checked by effect on a real single-device
Trainer: the newer keywords, the optimization hooks, the 1.x hooks, the run's attributes."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader
from trainer_models import Recorder, loader, quiet, regression_data

from ddpkit import DDPKitDeprecationWarning, DDPKitWarning, MisconfigurationError, Trainer
from ddpkit.callbacks import Callback, EarlyStopping, ModelCheckpoint

BATCHES = 8


def fit(tmp_path: Path, model: Recorder | None = None, **options: Any) -> tuple[Trainer, Recorder]:
    model = model if model is not None else Recorder()
    trainer = Trainer(default_root_dir=tmp_path, **quiet(**options))
    trainer.fit(model, loader(), loader())
    return trainer, model


def test_min_steps_keeps_training_past_an_early_stop(tmp_path: Path) -> None:
    class StopsAtOnce(Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            trainer.should_stop = True

    # Lightning's _parse_loop_limits: min_steps without min_epochs means min_epochs=1, so the
    # first epoch (8 batches) runs out before the stop counts
    trainer, _ = fit(tmp_path, callbacks=[StopsAtOnce()], min_steps=5, max_epochs=3)
    assert trainer.global_step == 8
    trainer, _ = fit(tmp_path / "c", callbacks=[StopsAtOnce()], min_steps=11, max_epochs=3)
    assert trainer.global_step == 11  # in the second epoch, once min_steps is met
    trainer, _ = fit(tmp_path / "b", callbacks=[StopsAtOnce()], max_epochs=3)
    assert trainer.global_step == 1


def test_overfit_batches_repeats_the_same_unshuffled_batches(tmp_path: Path) -> None:
    seen: list[list[float]] = []

    class Sees(Recorder):
        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            seen.append(batch[0][:, 0].tolist())
            return super().training_step(batch, batch_idx)

    trainer = Trainer(default_root_dir=tmp_path, **quiet(max_epochs=2, overfit_batches=2))
    trainer.fit(Sees(), DataLoader(regression_data(), batch_size=4, shuffle=True))
    first = regression_data().tensors[0][:, 0]
    assert seen == [first[:4].tolist(), first[4:8].tolist()] * 2
    assert (trainer.limit_train_batches, trainer.limit_val_batches) == (2, 2)


def test_gradient_clip_by_value_bounds_every_element(tmp_path: Path) -> None:
    model = Recorder(lr=1.0)
    before = [p.detach().clone() for p in model.parameters()]
    fit(tmp_path, model, max_steps=1, gradient_clip_val=0.001, gradient_clip_algorithm="value")
    for p, b in zip(model.parameters(), before):
        assert (p.detach() - b).abs().max().item() == pytest.approx(0.001, rel=1e-4)


def test_an_accumulation_schedule_changes_the_factor_by_epoch(tmp_path: Path) -> None:
    trainer, _ = fit(tmp_path, max_epochs=4, accumulate_grad_batches={1: 2, 3: 4})
    assert trainer.global_step == BATCHES + BATCHES // 2 + BATCHES // 2 + BATCHES // 4
    assert trainer.accumulate_grad_batches == 4  # the last epoch's factor


def test_reload_dataloaders_every_n_epochs_calls_the_hook_again(tmp_path: Path) -> None:
    class Counts(Recorder):
        loads = 0

        def train_dataloader(self) -> DataLoader[Any]:
            self.loads += 1
            return loader()

    model = Counts()
    trainer = Trainer(
        default_root_dir=tmp_path, **quiet(max_epochs=4, reload_dataloaders_every_n_epochs=2)
    )
    trainer.fit(model)
    assert model.loads == 2  # epochs 0 and 2


@pytest.mark.parametrize(("mode", "inference"), [(True, True), (False, False)])
def test_inference_mode_for_evaluation(tmp_path: Path, mode: bool, inference: bool) -> None:
    seen: list[bool] = []

    class Sees(Recorder):
        def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
            seen.append(torch.is_inference_mode_enabled())
            assert not torch.is_grad_enabled()
            super().validation_step(batch, batch_idx)

    fit(tmp_path, Sees(), max_epochs=1, inference_mode=mode)
    assert set(seen) == {inference}


def test_benchmark_and_detect_anomaly_hold_for_the_stage_only(tmp_path: Path) -> None:
    seen: list[tuple[bool, bool]] = []

    class Sees(Recorder):
        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            seen.append((torch.backends.cudnn.benchmark, torch.is_anomaly_enabled()))
            return super().training_step(batch, batch_idx)

    before = torch.backends.cudnn.benchmark
    fit(tmp_path, Sees(), max_steps=1, benchmark=not before, detect_anomaly=True)
    assert seen == [(not before, True)]
    assert (torch.backends.cudnn.benchmark, torch.is_anomaly_enabled()) == (before, False)


def test_skipping_the_rest_of_an_epoch_from_on_train_batch_start(tmp_path: Path) -> None:
    class Skips(Recorder):
        def on_train_batch_start(self, batch: Any, batch_idx: int) -> int | None:
            return -1 if batch_idx == 3 else None

    trainer, model = fit(tmp_path, Skips(), max_epochs=2)
    assert trainer.global_step == 6
    assert [b for _, b in model.train_batches] == [0, 1, 2] * 2


def test_an_optimizer_step_override_runs_the_closure_and_the_step(tmp_path: Path) -> None:
    calls: list[str] = []

    class Warmup(Recorder):
        def optimizer_step(
            self, epoch: int, batch_idx: int, optimizer: Any, optimizer_closure: Any = None
        ) -> None:
            calls.append("before")
            optimizer.step(closure=optimizer_closure)
            for group in optimizer.param_groups:
                group["lr"] = 0.05
            calls.append("after")

    reference, _ = fit(tmp_path / "a", Recorder(lr=0.05), max_steps=3)
    trainer, model = fit(tmp_path / "b", Warmup(lr=0.05), max_steps=3)
    assert calls == ["before", "after"] * 3
    assert trainer.global_step == 3
    assert torch.equal(model.layer.weight, reference.lightning_module.layer.weight)

    class Forgets(Recorder):
        def optimizer_step(self, *args: Any, **kwargs: Any) -> None:
            pass

    with pytest.raises(
        MisconfigurationError, match=r"Forgets.optimizer_step\(...\) did not run optimizer_closure"
    ):
        fit(tmp_path / "c", Forgets(), max_steps=1)


def test_the_1x_epoch_end_hooks_get_the_outputs_and_warn(tmp_path: Path) -> None:
    got: dict[str, Any] = {}

    class Old(Recorder):
        def training_epoch_end(self, outputs: list[Any]) -> None:
            got["train"] = outputs

        def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            super().validation_step(batch, batch_idx)
            return torch.tensor(float(batch_idx))

        def validation_epoch_end(self, outputs: list[Any]) -> None:
            got["val"] = outputs

    with pytest.warns(DDPKitDeprecationWarning) as caught:
        fit(tmp_path, Old(), max_epochs=1)
    text = " ".join(str(w.message) for w in caught)
    assert "Old.training_epoch_end is a Lightning 1.x hook" in text
    assert "on_train_epoch_end()" in text and "on_validation_epoch_end()" in text
    assert len(got["train"]) == BATCHES and set(got["train"][0]) == {"loss"}
    assert [float(v) for v in got["val"]] == [float(i) for i in range(BATCHES)]


def test_configure_callbacks_replaces_the_trainers_of_the_same_type(tmp_path: Path) -> None:
    mine = ModelCheckpoint(dirpath=tmp_path / "mine", monitor="val_loss")

    class Brings(Recorder):
        def configure_callbacks(self) -> Any:
            return [mine, EarlyStopping("val_loss")]

    trainer, _ = fit(tmp_path, Brings(), max_epochs=1)
    assert trainer.checkpoint_callback is mine
    assert [type(cb).__name__ for cb in trainer.callbacks] == ["EarlyStopping", "ModelCheckpoint"]
    assert Path(mine.best_model_path).parent == tmp_path / "mine"


def test_the_run_exposes_optimizers_schedulers_and_logged_metrics(tmp_path: Path) -> None:
    class Scheduled(Recorder):
        def configure_optimizers(self) -> Any:
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1)]

    trainer, model = fit(tmp_path, Scheduled(), max_epochs=1)
    assert isinstance(trainer.optimizers[0], torch.optim.SGD)
    assert isinstance(trainer.lr_schedulers[0], torch.optim.lr_scheduler.StepLR)
    assert trainer.lr_scheduler_configs[0].interval == "epoch"
    assert model.optimizers() is trainer.optimizers[0]
    assert model.lr_schedulers() is trainer.lr_schedulers[0]
    assert set(trainer.logged_metrics) == {"train_loss", "val_loss"}
    assert trainer.lightning_module is model
    assert (trainer.num_training_batches, trainer.num_val_batches) == (BATCHES, [BATCHES])
    assert trainer.state.fn == "fit" and trainer.state.finished


def test_manual_optimization_is_refused_naming_the_lightning_trainer(tmp_path: Path) -> None:
    model = Recorder()
    model.automatic_optimization = False
    with pytest.raises(
        MisconfigurationError, match=r"automatic_optimization = False.*ddpkit.lightning.Trainer"
    ):
        fit(tmp_path, model, max_epochs=1)


def test_resume_from_checkpoint_of_1x_is_the_fits_ckpt_path(tmp_path: Path) -> None:
    first, _ = fit(tmp_path / "a", max_epochs=1)
    with pytest.warns(DDPKitDeprecationWarning, match=r"resume_from_checkpoint"):
        trainer = Trainer(
            default_root_dir=tmp_path / "b",
            resume_from_checkpoint=first.checkpoint_path,
            **quiet(max_epochs=2),
        )
    model = Recorder()
    trainer.fit(model, loader())
    assert model.train_batches[0] == (1, 0)


def test_a_fit_too_short_for_a_step_row_says_so_and_where_the_values_went(tmp_path: Path) -> None:
    options = {**quiet(max_epochs=1), "log_every_n_steps": 50}
    trainer = Trainer(default_root_dir=tmp_path, **options)
    with pytest.warns(
        DDPKitWarning,
        match=r"Trainer\(log_every_n_steps=50\): this fit made 8 optimizer steps, fewer than 50, "
        r"so no step value was logged; the epoch values are in .*metrics.csv\. "
        r"Fix: Trainer\(log_every_n_steps=8\)",
    ):
        trainer.fit(Recorder(), loader(), loader())
    with (tmp_path / "metrics.csv").open() as fh:
        logged = list(csv.DictReader(fh))
    assert [r["val_loss"] != "" for r in logged] == [True]  # the epoch row only
    with pytest.warns(
        DDPKitWarning, match=r"no step value was logged; nothing reached .*metrics.csv"
    ):
        Trainer(default_root_dir=tmp_path / "a", **options).fit(Recorder(), loader())
    # No logger: nothing to say (the suite's filter would turn a DDPKitWarning into an error).
    Trainer(default_root_dir=tmp_path / "b", logger=False, **options).fit(Recorder(), loader())
