"""The loop's options, on a real single-device Trainer: what runs, how often, what is written."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from terminal import Terminal
from torch.utils.data import DataLoader, DistributedSampler
from trainer_models import Recorder, loader, quiet, regression_data

from ddpkit import MisconfigurationError, Trainer
from ddpkit.core._saving import load_checkpoint
from ddpkit.trainer._lightning_loops import read_position

BATCHES = 8  # loader(): 32 samples, batch size 4


def fit(
    tmp_path: Path,
    model: Recorder | None = None,
    train: Any = None,
    val: Any = None,
    **options: Any,
) -> tuple[Trainer, Recorder]:
    model = model if model is not None else Recorder()
    trainer = Trainer(default_root_dir=tmp_path, **quiet(**options))
    trainer.fit(model, train if train is not None else loader(), val)
    return trainer, model


# -- how long -------------------------------------------------------------------------------


def test_max_epochs_runs_every_batch_of_every_epoch(tmp_path: Path) -> None:
    trainer, model = fit(tmp_path, max_epochs=2)
    assert (trainer.global_step, trainer.current_epoch) == (2 * BATCHES, 2)
    assert model.train_batches == [(e, b) for e in range(2) for b in range(BATCHES)]
    epoch = ["on_train_epoch_start", "on_train_epoch_end"]
    assert model.calls == ["on_fit_start", *epoch, *epoch, "on_fit_end"]


@pytest.mark.parametrize(("max_epochs", "steps"), [(None, 5), (1, 5), (3, 11)])
def test_max_steps_stops_mid_epoch(tmp_path: Path, max_epochs: int | None, steps: int) -> None:
    trainer, model = fit(tmp_path, max_epochs=max_epochs, max_steps=steps)
    assert trainer.global_step == steps
    assert len(model.train_batches) == steps


def test_max_steps_beyond_max_epochs_stops_at_max_epochs(tmp_path: Path) -> None:
    trainer, _ = fit(tmp_path, max_epochs=1, max_steps=100)
    assert (trainer.global_step, trainer.current_epoch) == (BATCHES, 1)


@pytest.mark.parametrize(("limit", "per_epoch"), [(3, 3), (0.25, 2), (1.0, BATCHES), (0, 0)])
def test_limit_train_batches(tmp_path: Path, limit: float, per_epoch: int) -> None:
    trainer, model = fit(tmp_path, max_epochs=2, limit_train_batches=limit)
    assert trainer.global_step == 2 * per_epoch
    assert [b for _, b in model.train_batches] == list(range(per_epoch)) * 2


@pytest.mark.parametrize("limit", [1.5, -0.5, True])
def test_limit_train_batches_out_of_range_is_an_error(tmp_path: Path, limit: Any) -> None:
    with pytest.raises(MisconfigurationError, match=rf"Trainer\(limit_train_batches={limit!r}\)"):
        fit(tmp_path, max_epochs=1, limit_train_batches=limit)


def test_fast_dev_run_runs_one_batch_and_writes_nothing(tmp_path: Path) -> None:
    trainer, model = fit(tmp_path, val=loader(), fast_dev_run=True, max_epochs=5)
    assert trainer.global_step == 1
    assert model.train_batches == [(0, 0)]
    assert model.val_batches == 1
    assert trainer.checkpoint_path is None
    assert list(tmp_path.iterdir()) == []  # no checkpoint, no metrics.csv


def test_fast_dev_run_with_a_number_runs_that_many_batches(tmp_path: Path) -> None:
    trainer, model = fit(tmp_path, val=loader(), fast_dev_run=3)
    assert trainer.global_step == 3
    assert model.val_batches == 3


def test_fast_dev_run_below_one_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MisconfigurationError, match=r"fast_dev_run=-1"):
        Trainer(fast_dev_run=-1)


# -- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "batches"), [(None, BATCHES), (2, 2), (0.5, 4), (0, 0)])
def test_limit_val_batches(tmp_path: Path, limit: float | None, batches: int) -> None:
    trainer, model = fit(tmp_path, val=loader(), max_epochs=1, limit_val_batches=limit)
    assert model.val_batches == batches
    assert ("val_loss" in trainer.callback_metrics) is (batches > 0)


@pytest.mark.parametrize(("interval", "per_epoch"), [(2, 4), (0.5, 2), (1.0, 1)])
def test_val_check_interval(tmp_path: Path, interval: float, per_epoch: int) -> None:
    _, model = fit(
        tmp_path, val=loader(), max_epochs=2, val_check_interval=interval, limit_val_batches=1
    )
    assert model.val_batches == 2 * per_epoch
    assert model.calls.count("on_validation_epoch_end") == 2 * per_epoch


def test_a_validation_inside_the_epoch_leaves_the_training_epoch_values_whole(
    tmp_path: Path,
) -> None:
    class LogsBatchIndex(Recorder):
        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            self.log("index", float(batch_idx), on_step=False, on_epoch=True)
            return super().training_step(batch, batch_idx)

    trainer, _ = fit(
        tmp_path,
        LogsBatchIndex(),
        val=loader(),
        max_epochs=1,
        val_check_interval=0.5,
        limit_val_batches=1,
    )
    assert float(trainer.callback_metrics["index"]) == 3.5  # the mean over all 8 batches
    header, *rows = (line.split(",") for line in (tmp_path / "metrics.csv").read_text().split())
    by_row = [
        {k: v for k, v in zip(header, row) if v and k not in ("epoch", "step")} for row in rows
    ]
    # Two validation rows with only val_loss, one training epoch row with only index.
    assert [sorted(r) for r in by_row if "train_loss" not in r] == [
        ["val_loss"],
        ["val_loss"],
        ["index"],
    ]


def test_check_val_every_n_epoch(tmp_path: Path) -> None:
    _, model = fit(
        tmp_path, val=loader(), max_epochs=4, check_val_every_n_epoch=2, limit_val_batches=1
    )
    assert model.val_batches == 2  # after epochs 1 and 3
    ends = [c for c in model.calls if c in ("on_train_epoch_end", "on_validation_epoch_end")]
    train_end, val_end = "on_train_epoch_end", "on_validation_epoch_end"
    # The epoch-end validation runs before on_train_epoch_end (as in Lightning 2).
    assert ends == [train_end, val_end, train_end, train_end, val_end, train_end]


@pytest.mark.parametrize(("steps", "batches"), [(2, 2), (-1, BATCHES), (0, 0)])
def test_sanity_check_runs_before_training_and_logs_nothing(
    tmp_path: Path, steps: int, batches: int
) -> None:
    model = Recorder()
    trainer = Trainer(
        default_root_dir=tmp_path,
        **quiet(num_sanity_val_steps=steps, max_epochs=1, check_val_every_n_epoch=2),
    )
    trainer.fit(model, loader(), loader())  # check_val_every_n_epoch=2: no validation after it
    assert model.val_batches == batches
    assert "val_loss" not in trainer.callback_metrics
    # As in Lightning, the sanity check runs the validation hooks (with logging off).
    assert model.calls.count("on_validation_epoch_end") == (1 if batches else 0)


# -- the optimizer step ---------------------------------------------------------------------


@pytest.mark.parametrize(("accumulate", "steps"), [(1, 8), (2, 4), (3, 3), (8, 1), (20, 1)])
def test_accumulate_grad_batches_steps_at_the_boundary_and_the_epoch_end(
    tmp_path: Path, accumulate: int, steps: int
) -> None:
    trainer, _ = fit(tmp_path, max_epochs=2, accumulate_grad_batches=accumulate)
    assert trainer.global_step == 2 * steps


def test_accumulating_half_batches_equals_the_full_batch(tmp_path: Path) -> None:
    _, accumulated = fit(
        tmp_path / "a", train=loader(batch_size=4), max_epochs=2, accumulate_grad_batches=2
    )
    _, full = fit(tmp_path / "b", train=loader(batch_size=8), max_epochs=2)
    for (name, a), (_, b) in zip(
        accumulated.state_dict().items(), full.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    _, small = fit(tmp_path / "c", train=loader(batch_size=4), max_epochs=2)
    assert not torch.allclose(small.layer.weight, full.layer.weight, atol=1e-4)


def test_accumulate_grad_batches_below_one_is_an_error() -> None:
    with pytest.raises(MisconfigurationError, match=r"accumulate_grad_batches=0"):
        Trainer(accumulate_grad_batches=0)


def test_gradient_clip_val_bounds_the_update(tmp_path: Path) -> None:
    model = Recorder(lr=1.0)
    before = [p.detach().clone() for p in model.parameters()]
    fit(tmp_path, model, max_steps=1, gradient_clip_val=0.01)
    delta = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
    # SGD with lr=1 moves by the clipped gradient, whose total norm is the clip value.
    assert delta.norm().item() == pytest.approx(0.01, rel=1e-4)


def test_without_clipping_the_same_update_is_larger(tmp_path: Path) -> None:
    model = Recorder(lr=1.0)
    before = [p.detach().clone() for p in model.parameters()]
    fit(tmp_path, model, max_steps=1)
    delta = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
    assert delta.norm().item() > 0.1


# -- schedulers -----------------------------------------------------------------------------


class Scheduled(Recorder):
    def __init__(self, config: str) -> None:
        super().__init__(lr=0.1)
        self.config = config

    def configure_optimizers(self) -> Any:
        opt = torch.optim.SGD(self.parameters(), lr=self.lr)
        if self.config == "epoch":
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)]
        if self.config == "step":
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            return {
                "optimizer": opt,
                "lr_scheduler": {"scheduler": sched, "interval": "step", "frequency": 2},
            }
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)
        return {"optimizer": opt, "lr_scheduler": plateau, "monitor": self.config}


def lr_of(trainer: Trainer) -> float:
    return float(trainer.optimizers[0].param_groups[0]["lr"])


def test_an_epoch_scheduler_steps_once_per_epoch(tmp_path: Path) -> None:
    trainer, _ = fit(tmp_path, Scheduled("epoch"), max_epochs=3)
    assert lr_of(trainer) == pytest.approx(0.1 * 0.5**3)


def test_a_step_scheduler_steps_every_frequency_steps(tmp_path: Path) -> None:
    trainer, _ = fit(tmp_path, Scheduled("step"), max_epochs=1)
    assert lr_of(trainer) == pytest.approx(0.1 * 0.5 ** (BATCHES // 2))


def test_reduce_on_plateau_reads_its_monitored_metric(tmp_path: Path) -> None:
    trainer, _ = fit(tmp_path, Scheduled("val_loss"), val=loader(), max_epochs=2)
    assert lr_of(trainer) <= 0.1


def test_reduce_on_plateau_without_its_metric_names_the_logged_ones(tmp_path: Path) -> None:
    with pytest.raises(MisconfigurationError, match=r"monitors 'nope'.*'train_loss'"):
        fit(tmp_path, Scheduled("nope"), max_epochs=1)


# -- what is written ------------------------------------------------------------------------


def test_default_checkpoint_at_the_end_of_fit(tmp_path: Path) -> None:
    trainer, model = fit(tmp_path, max_epochs=2)
    expected = tmp_path / "checkpoints" / f"epoch=1-step={2 * BATCHES}.ckpt"
    assert trainer.checkpoint_path == str(expected)
    data = load_checkpoint(expected)
    assert sorted(data) == [
        "callbacks",
        "ddpkit_rng",
        "ddpkit_version",
        "epoch",
        "global_step",
        "loops",
        "lr_schedulers",
        "optimizer_states",
        "precision",
        "pytorch-lightning_version",
        "state_dict",
    ]
    # Lightning's meaning: "epoch" is the epoch that wrote it; the loop resumes after it.
    assert (data["epoch"], data["global_step"]) == (1, 2 * BATCHES)
    assert read_position(data)["epochs_completed"] == 2
    assert list(data["callbacks"]) == [trainer.checkpoint_callback.state_key]
    assert data["ddpkit_version"] == __import__("ddpkit").__version__
    for name, value in model.state_dict().items():
        assert torch.equal(data["state_dict"][name], value)


def test_no_checkpoint_when_disabled(tmp_path: Path) -> None:
    trainer, _ = fit(tmp_path, max_epochs=1, enable_checkpointing=False)
    assert trainer.checkpoint_path is None
    assert not (tmp_path / "checkpoints").exists()


def test_save_checkpoint_after_fit_and_validate_from_it(tmp_path: Path) -> None:
    trainer, model = fit(tmp_path, max_epochs=1)
    path = tmp_path / "manual" / "model.ckpt"
    trainer.save_checkpoint(path)
    assert load_checkpoint(path)["global_step"] == BATCHES
    fresh = Recorder()
    assert not torch.equal(fresh.layer.weight, model.layer.weight)
    [metrics] = Trainer(default_root_dir=tmp_path, **quiet()).validate(
        fresh, loader(), ckpt_path=str(path)
    )
    assert torch.equal(fresh.layer.weight, model.layer.weight)
    assert set(metrics) == {"val_loss"}


def test_save_checkpoint_before_any_model_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MisconfigurationError, match=r"no model yet"):
        Trainer().save_checkpoint(tmp_path / "x.ckpt")


def test_csv_metrics_log_in_default_root_dir(tmp_path: Path) -> None:
    fit(tmp_path, val=loader(), max_epochs=2, log_every_n_steps=4, limit_val_batches=2)
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert header[:2] == ["epoch", "step"]
    assert {"train_loss", "val_loss"} <= set(header)
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    step_rows = [r for r in rows if r["train_loss"]]
    assert [int(r["step"]) for r in step_rows] == [3, 7, 11, 15]  # Lightning's (global_step - 1)
    assert [r["epoch"] for r in rows if r["val_loss"]] == ["0", "1"]


def test_no_csv_without_a_logger(tmp_path: Path) -> None:
    fit(tmp_path, max_epochs=1, logger=False)
    assert not (tmp_path / "metrics.csv").exists()


def test_progress_bar_on_rank_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm")
    monkeypatch.setattr(sys, "stderr", Terminal())  # the bar draws in a terminal only
    options = {"enable_model_summary": False, "log_every_n_steps": 1}
    trainer = Trainer(default_root_dir=tmp_path, max_epochs=1, num_sanity_val_steps=0, **options)
    trainer.fit(Recorder(), loader())
    assert [line.split(":")[0] for line in sys.stderr.screen()] == ["epoch 0"]
    monkeypatch.setattr(sys, "stderr", Terminal())
    trainer = Trainer(
        default_root_dir=tmp_path / "quiet", max_epochs=1, enable_progress_bar=False, **options
    )
    trainer.fit(Recorder(), loader())
    assert sys.stderr.getvalue() == ""


# -- counters, metrics, stages --------------------------------------------------------------


def test_a_second_fit_goes_on_from_the_first(tmp_path: Path) -> None:
    """Lightning's fit loop keeps its progress: a second fit on the same Trainer trains nothing
    more once max_steps is reached (Lightning 2.x's ``_FitLoop.skip``)."""
    trainer = Trainer(default_root_dir=tmp_path, **quiet(max_steps=5))
    first, second = Recorder(), Recorder()
    trainer.fit(first, loader())
    weights = first.layer.weight.detach().clone()
    trainer.fit(second, loader())
    assert trainer.global_step == 5 and second.train_batches == []
    trainer.fit(first, loader())
    assert torch.equal(first.layer.weight, weights)  # nothing more trained


def test_resume_equals_the_uninterrupted_run(tmp_path: Path) -> None:
    """Adam's moments, the scheduler and the counters come back from the checkpoint."""
    uninterrupted, whole = fit(tmp_path / "whole", Scheduled("epoch"), max_epochs=3)
    first, _ = fit(tmp_path / "first", Scheduled("epoch"), max_epochs=1)
    model = Scheduled("epoch")
    resumed = Trainer(default_root_dir=tmp_path / "second", **quiet(max_epochs=3))
    resumed.fit(model, loader(), ckpt_path=first.checkpoint_path)
    assert model.train_batches[0] == (1, 0)  # starts at epoch 1
    assert (resumed.global_step, resumed.current_epoch) == (3 * BATCHES, 3)
    assert lr_of(resumed) == pytest.approx(lr_of(uninterrupted))
    for name, value in whole.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], value, msg=name)


class Note:
    """An arbitrary object a user put into a checkpoint."""


@pytest.mark.parametrize("stage", ["fit", "validate", "test"])
def test_a_checkpoint_with_code_loads_only_when_the_user_opts_out(
    tmp_path: Path, stage: str
) -> None:
    first, _ = fit(tmp_path, max_epochs=1)
    assert first.checkpoint_path is not None
    data = load_checkpoint(first.checkpoint_path)
    path = tmp_path / "with_note.ckpt"
    torch.save({**data, "note": Note()}, path)
    trainer = Trainer(default_root_dir=tmp_path / "again", **quiet(max_epochs=2))
    run = getattr(trainer, stage)
    with pytest.raises(pickle.UnpicklingError, match="Note"):
        run(Recorder(), loader(), ckpt_path=path)
    model = Recorder()
    run(model, loader(), ckpt_path=path, weights_only=False)
    if stage == "fit":
        assert model.train_batches[0] == (1, 0)  # resumed
    else:
        assert torch.equal(model.layer.weight, data["state_dict"]["layer.weight"])


def test_set_epoch_every_epoch_on_the_users_distributed_sampler(tmp_path: Path) -> None:
    class Recording(DistributedSampler[Any]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.epochs: list[int] = []

        def set_epoch(self, epoch: int) -> None:
            self.epochs.append(epoch)
            super().set_epoch(epoch)

    data = regression_data()
    sampler = Recording(data, num_replicas=1, rank=0, shuffle=True)
    fit(tmp_path, train=DataLoader(data, batch_size=4, sampler=sampler), max_epochs=3)
    assert sampler.epochs == [0, 1, 2]


def test_deterministic_holds_during_the_stage_only(tmp_path: Path) -> None:
    class Checks(Recorder):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[bool] = []

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            self.seen.append(torch.are_deterministic_algorithms_enabled())
            return super().training_step(batch, batch_idx)

    assert not torch.are_deterministic_algorithms_enabled()
    _, model = fit(tmp_path, Checks(), max_steps=2, deterministic=True)
    assert model.seen == [True, True]
    assert not torch.are_deterministic_algorithms_enabled()


def test_metrics_after_fit(tmp_path: Path) -> None:
    trainer, _ = fit(tmp_path, val=loader(), max_epochs=1)
    assert set(trainer.callback_metrics) == {"train_loss", "val_loss"}
    assert set(trainer.logged_metrics) == {"train_loss", "val_loss"}
    assert set(trainer.progress_bar_metrics) == {"train_loss"}
    assert all(v.ndim == 0 for v in trainer.callback_metrics.values())


def test_validate_test_and_predict(tmp_path: Path) -> None:
    trainer = Trainer(default_root_dir=tmp_path, **quiet())
    model = Recorder()
    [val] = trainer.validate(model, loader())
    [test] = trainer.test(model, loader())
    assert set(val) == {"val_loss"}
    assert set(test) == {"test_loss"}
    assert model.calls == ["on_validation_epoch_end", "on_test_epoch_end"]
    x = regression_data().tensors[0]
    predictions = trainer.predict(model, loader())
    assert len(predictions) == BATCHES
    torch.testing.assert_close(torch.cat(predictions), model(x).detach())
    assert model.training is True  # as in Lightning, each stage gives the module back as it was


def test_predict_without_predict_step_calls_forward(tmp_path: Path) -> None:
    net = torch.nn.Linear(2, 1)
    predictions = Trainer(**quiet()).predict(net, DataLoader(regression_data().tensors[0], 8))
    assert [tuple(p.shape) for p in predictions] == [(8, 1)] * 4


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ("fit", r"Trainer.fit: no training data.*train_dataloader\(\)"),
        ("validate", r"Trainer.validate: no data.*val_dataloader\(\)"),
        ("test", r"Trainer.test: no data.*test_dataloader\(\)"),
        ("predict", r"Trainer.predict: no data.*predict_dataloader\(\)"),
    ],
)
def test_a_stage_without_data_says_how_to_give_it(stage: str, message: str) -> None:
    with pytest.raises(MisconfigurationError, match=message):
        getattr(Trainer(**quiet()), stage)(Recorder())


def test_a_stage_needs_a_module() -> None:
    with pytest.raises(MisconfigurationError, match=r"Trainer.fit\(model=<str>\)"):
        Trainer().fit("model")  # type: ignore[arg-type]
