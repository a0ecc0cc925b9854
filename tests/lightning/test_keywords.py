"""Lightning 1.x's other Trainer keywords: each does, on Lightning 2.x, what it did in 1.x (checked
by its effect on the Trainer or on a run), warns once naming the 2.x spelling, or is refused with
the replacement named."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

import torch  # noqa: E402
from pytorch_lightning.callbacks import (  # noqa: E402
    DeviceStatsMonitor,
    GradientAccumulationScheduler,
    ModelCheckpoint,
    ModelSummary,
    TQDMProgressBar,
)
from pytorch_lightning.loggers import CSVLogger  # noqa: E402
from pytorch_lightning.profilers import PassThroughProfiler, SimpleProfiler  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from ddpkit import DDPKitDeprecationWarning, DDPKitWarning, MisconfigurationError  # noqa: E402
from ddpkit.lightning import Trainer  # noqa: E402
from ddpkit.lightning._callbacks import GradNormLogger  # noqa: E402
from ddpkit.lightning._keywords import KEYWORDS  # noqa: E402


class Tiny(pl.LightningModule):
    def __init__(self, lr: float = 0.1, batch_size: int = 8) -> None:
        super().__init__()
        self.lr = lr
        self.batch_size = batch_size
        self.layer = nn.Linear(3, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr)

    def train_dataloader(self) -> DataLoader:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(64, 3, generator=g)
        return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=self.batch_size)


def build(**kwargs: Any) -> tuple[Trainer, list[str]]:
    kwargs.setdefault("logger", False)
    if "progress_bar_refresh_rate" not in kwargs and "process_position" not in kwargs:
        kwargs.setdefault("enable_progress_bar", False)
    if "weights_summary" not in kwargs:
        kwargs.setdefault("enable_model_summary", False)
    with pytest.warns(DDPKitDeprecationWarning) as record:
        trainer = Trainer(accelerator="cpu", devices=1, **kwargs)
    return trainer, [str(w.message) for w in record if w.category is DDPKitDeprecationWarning]


def the_message(messages: list[str], keyword: str) -> str:
    mine = [m for m in messages if m.startswith(f"Trainer({keyword}=")]
    assert len(mine) == 1, messages  # exactly one warning per 1.x keyword
    return mine[0]


@pytest.mark.parametrize(
    ("kwargs", "spelling"),
    [
        ({"progress_bar_refresh_rate": 0}, "enable_progress_bar=False"),
        ({"progress_bar_refresh_rate": 7}, "callbacks=[TQDMProgressBar(refresh_rate=7)]"),
        ({"weights_summary": None}, "enable_model_summary=False"),
        ({"weights_summary": "full"}, "callbacks=[ModelSummary(max_depth=-1)]"),
        ({"checkpoint_callback": False}, "enable_checkpointing=False"),
        ({"terminate_on_nan": True}, "detect_anomaly=True"),
        ({"replace_sampler_ddp": False}, "use_distributed_sampler=False"),
        ({"reload_dataloaders_every_epoch": True}, "reload_dataloaders_every_n_epochs=1"),
        ({"profiler": True}, "profiler='simple'"),
        ({"log_gpu_memory": "all"}, "callbacks=[DeviceStatsMonitor()]"),
        ({"resume_from_checkpoint": "last.ckpt"}, "trainer.fit(model, ckpt_path='last.ckpt')"),
        (
            {"accumulate_grad_batches": {0: 1, 2: 4}},
            "callbacks=[GradientAccumulationScheduler(scheduling={0: 1, 2: 4})]",
        ),
        (
            {"track_grad_norm": 2},
            "self.log_dict(grad_norm(self, norm_type=2)) in on_before_optimizer_step",
        ),
        ({"auto_lr_find": True}, "Tuner(trainer).lr_find(model), which trainer.tune(model) runs"),
    ],
)
def test_a_mapped_keyword_warns_once_with_its_2x_spelling(
    kwargs: dict[str, Any], spelling: str
) -> None:
    (keyword,) = kwargs
    _, messages = build(**kwargs)
    message = the_message(messages, keyword)
    assert message.endswith(f"ddpkit runs it as its Lightning 2.x spelling, {spelling}.")
    assert f"Lightning {KEYWORDS[keyword].removed}" in message


@pytest.mark.parametrize(
    "kwargs",
    [
        {"progress_bar_refresh_rate": 1},  # 1.0–1.1's default: Lightning's bar, every batch
        {"checkpoint_callback": True},
        {"terminate_on_nan": False},
        {"flush_logs_every_n_steps": 100},
        {"prepare_data_per_node": True},
        {"amp_backend": "native"},
        {"amp_level": "O2"},  # 1.0–1.4's default: 1.x read it only with Apex
        {"auto_select_gpus": True},  # no gpus=: 1.x picked nothing either
        {"auto_select_gpus": False},
        {"truncated_bptt_steps": 0},
        {"automatic_optimization": True},
        {"enable_pl_optimizer": True},
        {"max_steps": None},
        {"profiler": False},
    ],
)
def test_a_value_that_asks_for_the_2x_default_says_drop_it(kwargs: dict[str, Any]) -> None:
    (keyword,) = kwargs
    _, messages = build(**kwargs)
    assert the_message(messages, keyword).endswith(
        "it asks for what Lightning 2.x does. Fix: drop it."
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"weights_summary": "top"},
        {"progress_bar_refresh_rate": None},
        {"process_position": 0},
        {"stochastic_weight_avg": False},
        {"move_metrics_to_cpu": False},
        {"multiple_trainloader_mode": "max_size_cycle"},
        {"amp_level": None},
        {"track_grad_norm": -1},
        {"truncated_bptt_steps": None},
        {"resume_from_checkpoint": None},
        {"accumulate_grad_batches": None},
        {"gpus": None},
        {"num_processes": None},
        {"supervise": None},
    ],
)
def test_the_last_1x_default_says_nothing(kwargs: dict[str, Any]) -> None:
    # What a tool passing every default of the signature (LightningCLI, from_argparse_args) sends.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DDPKitWarning)
        Trainer(accelerator="cpu", devices=1, logger=False, **kwargs)


def test_mapped_keywords_have_their_effect() -> None:
    trainer, _ = build(progress_bar_refresh_rate=0)
    assert trainer.progress_bar_callback is None
    trainer, _ = build(progress_bar_refresh_rate=7, process_position=2)
    bar = trainer.progress_bar_callback
    assert bar is not None and (bar.refresh_rate, bar.process_position) == (7, 2)
    # As in 1.x, a progress bar of the user's wins over any refresh rate, 0 included.
    mine = TQDMProgressBar(refresh_rate=9)
    trainer, messages = build(progress_bar_refresh_rate=0, callbacks=[mine])
    assert trainer.progress_bar_callback is mine
    assert "asks for what Lightning 2.x does. Fix: drop it." in the_message(
        messages, "progress_bar_refresh_rate"
    )
    # As in 1.5–1.9, a ModelSummary of the user's wins over weights_summary ("Skipping setting
    # a default"), and a DeviceStatsMonitor of the user's is not doubled by log_gpu_memory.
    summary = ModelSummary(max_depth=2)
    trainer, _ = build(weights_summary="full", callbacks=[summary])
    assert [c for c in trainer.callbacks if isinstance(c, ModelSummary)] == [summary]
    monitor = DeviceStatsMonitor()
    trainer, _ = build(log_gpu_memory="all", callbacks=[monitor])
    assert [c for c in trainer.callbacks if isinstance(c, DeviceStatsMonitor)] == [monitor]
    # Without a bar, as in 1.x, process_position has nothing to place (no bar is added).
    for off in ({"progress_bar_refresh_rate": 0}, {"enable_progress_bar": False}):
        trainer, _ = build(process_position=1, **off)
        assert trainer.progress_bar_callback is None
    # A 2.x name, in any case, as Lightning takes it (no 1.x value: no warning).
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, profiler="Simple")
    assert isinstance(trainer.profiler, SimpleProfiler)
    trainer, _ = build(weights_summary="full")
    assert [c._max_depth for c in trainer.callbacks if isinstance(c, ModelSummary)] == [-1]
    trainer, _ = build(weights_summary=None)
    assert not [c for c in trainer.callbacks if isinstance(c, ModelSummary)]
    trainer, _ = build(checkpoint_callback=False)
    assert trainer.checkpoint_callback is None
    mine = ModelCheckpoint(monitor="loss")
    trainer, _ = build(checkpoint_callback=mine)
    assert trainer.checkpoint_callback is mine
    trainer, _ = build(terminate_on_nan=True)
    assert trainer._detect_anomaly is True
    trainer, _ = build(replace_sampler_ddp=False)
    assert trainer._accelerator_connector.use_distributed_sampler is False
    trainer, _ = build(reload_dataloaders_every_epoch=True)
    assert trainer.reload_dataloaders_every_n_epochs == 1
    trainer, _ = build(max_steps=None)
    assert trainer.max_steps == -1
    trainer, _ = build(profiler=True)
    assert isinstance(trainer.profiler, SimpleProfiler)
    trainer, _ = build(profiler=False)
    assert isinstance(trainer.profiler, PassThroughProfiler)
    trainer, _ = build(log_gpu_memory="min_max")
    assert any(isinstance(c, DeviceStatsMonitor) for c in trainer.callbacks)
    trainer, _ = build(accumulate_grad_batches={0: 1, 2: 4})
    (scheduler,) = [c for c in trainer.callbacks if isinstance(c, GradientAccumulationScheduler)]
    assert scheduler.scheduling == {0: 1, 2: 4} and trainer.accumulate_grad_batches == 1
    trainer, _ = build(track_grad_norm="inf")
    assert [c.norm_type for c in trainer.callbacks if isinstance(c, GradNormLogger)] == [
        float("inf")
    ]


def test_flush_logs_every_n_steps_sets_the_csv_loggers_interval(tmp_path: Path) -> None:
    trainer, _ = build(flush_logs_every_n_steps=3, logger=CSVLogger(tmp_path, name="logs"))
    (logger,) = trainer.loggers
    table = Path(logger.log_dir) / "metrics.csv"
    for step in range(2):
        logger.log_metrics({"x": float(step)}, step=step)
    assert not table.exists()  # CSVLogger's own default would wait for 100 steps
    logger.log_metrics({"x": 2.0}, step=2)
    assert table.read_text().count("\n") == 4  # the header and three rows, flushed at step 3


def test_resume_from_checkpoint_resumes_fit(tmp_path: Path) -> None:
    first = pl.Trainer(
        accelerator="cpu",
        max_epochs=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    first.fit(Tiny())
    path = tmp_path / "one.ckpt"
    first.save_checkpoint(path)
    trainer, _ = build(resume_from_checkpoint=str(path), max_epochs=2, default_root_dir=tmp_path)
    trainer.fit(Tiny())
    assert (trainer.current_epoch, trainer.global_step) == (2, 2 * first.global_step)
    assert trainer.ckpt_path == str(path)


def test_track_grad_norm_logs_1x_names_during_fit(tmp_path: Path) -> None:
    trainer, _ = build(track_grad_norm=2, max_steps=2, default_root_dir=tmp_path)
    trainer.fit(Tiny())
    # Logged per step and per epoch, as 1.x's LightningModule.log_grad_norm did.
    names = {"grad_2.0_norm_total_step", "grad_2.0_norm/layer.weight_epoch"}
    assert names <= set(trainer.logged_metrics), sorted(trainer.logged_metrics)


def test_prepare_data_per_node_is_set_on_the_module(tmp_path: Path) -> None:
    trainer, _ = build(prepare_data_per_node=False, max_steps=1, default_root_dir=tmp_path)
    model = Tiny()
    trainer.fit(model)
    assert model.prepare_data_per_node is False


def test_tune_runs_lightnings_tuner_as_1x_did(tmp_path: Path) -> None:
    trainer, _ = build(
        auto_lr_find=True, auto_scale_batch_size="power", max_epochs=1, default_root_dir=tmp_path
    )
    torch.manual_seed(0)  # the finder needs a curve without a divergence: the same start each run
    model = Tiny(lr=1e-7, batch_size=2)
    with pytest.warns(DDPKitDeprecationWarning, match=r"trainer.tune\(model\): removed in"):
        result = trainer.tune(
            model,
            scale_batch_size_kwargs={"max_trials": 2, "steps_per_trial": 1},
            lr_find_kwargs={"num_training": 30, "max_lr": 0.1, "early_stop_threshold": None},
        )
    assert set(result) == {"scale_batch_size", "lr_find"}
    assert model.batch_size == result["scale_batch_size"] > 2  # it grew: the data allows it
    assert model.lr == result["lr_find"].suggestion() != 1e-7


def test_1x_stage_keywords_are_renamed(tmp_path: Path) -> None:
    trainer, _ = build(max_steps=1, default_root_dir=tmp_path, weights_summary=None)
    model = Tiny()
    with pytest.warns(DDPKitDeprecationWarning, match=r"fit\(train_dataloader=\.\.\.\): renamed"):
        trainer.fit(model, train_dataloader=model.train_dataloader())
    assert trainer.global_step == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"stochastic_weight_avg": True},
            r"StochasticWeightAveraging\(swa_lrs=<your learning rate>\)",
        ),
        ({"tpu_cores": 8}, r"Fix: pass accelerator='tpu', devices=8 and no 1\.x device flag"),
        ({"ipus": 4}, r"lightning-graphcore"),
        (
            {"move_metrics_to_cpu": True},
            r"removed in Lightning 2\.0, and Lightning 2\.x has no such",
        ),
        ({"multiple_trainloader_mode": "min_size"}, r"CombinedLoader\(loaders, mode='min_size'\)"),
        (
            {"multiple_trainloader_mode": "max"},
            r"Lightning 1\.x took 'max_size_cycle' or 'min_size'",
        ),
        (
            {"amp_backend": "apex"},
            r"NVIDIA Apex went with it\. Fix: drop it and pass precision='16-mixed'",
        ),
        ({"truncated_bptt_steps": 5}, r"manual optimization"),
        ({"enable_pl_optimizer": False}, r"LightningOptimizer"),
        ({"weights_save_path": "w"}, r"callbacks=\[ModelCheckpoint\(dirpath='w'\)\]"),
        ({"weights_summary": "some"}, r"Lightning 1\.x took None, 'top' or 'full'"),
        ({"track_grad_norm": 0}, r"-1, a positive number or 'inf'"),
        (
            {"checkpoint_callback": False, "enable_checkpointing": True},
            r"checkpoint_callback=False means enable_checkpointing=False, which contradicts "
            r"enable_checkpointing=True\. Fix: pass only enable_checkpointing=True",
        ),
        ({"auto_scale_batch_size": "linear"}, r"False, True, 'power' or 'binsearch'"),
        # Kept keywords at a value neither 1.x nor 2.x takes (found by test_trainer_fuzz.py:
        # Lightning raised its own message, a TypeError, or nothing until fit).
        ({"profiler": ""}, r"Lightning 2\.x takes a Profiler, None or one of 'simple', "),
        ({"max_steps": "x"}, r"Trainer\(max_steps='x'\): Lightning 2\.x takes an int ≥ -1"),
        ({"accumulate_grad_batches": "x"}, r"Lightning 2\.x takes an int ≥ 1, and Lightning 1\.x"),
        (
            {
                "accumulate_grad_batches": {0: 1, 2: 2},
                "callbacks": [GradientAccumulationScheduler({0: 1})],
            },
            r"both set the accumulation schedule\. Fix: keep one",
        ),
        (
            {"checkpoint_callback": False, "callbacks": [ModelCheckpoint()]},
            r"Trainer\(checkpoint_callback=False, callbacks=\[\.\.\., ModelCheckpoint\(\.\.\.\)\]\)",
        ),
        (
            {"progress_bar_refresh_rate": 5, "enable_progress_bar": False},
            r"progress_bar_refresh_rate=5 means enable_progress_bar=True, which contradicts "
            r"enable_progress_bar=False",
        ),
    ],
)
def test_a_keyword_lightning_2x_cannot_honour_is_refused(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(MisconfigurationError, match=message):
        Trainer(accelerator="cpu", devices=1, logger=False, **kwargs)


class Manual(Tiny):
    """A 1.1–1.2 module written for ``Trainer(automatic_optimization=False)``."""

    def training_step(self, batch: Any, batch_idx: int) -> None:
        optimizer = self.optimizers()
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        optimizer.zero_grad()
        self.manual_backward(loss)
        optimizer.step()


def test_automatic_optimization_false_runs_the_module_on_manual_optimization(
    tmp_path: Path,
) -> None:
    trainer, messages = build(automatic_optimization=False, max_steps=3, default_root_dir=tmp_path)
    assert "self.automatic_optimization = False" in the_message(messages, "automatic_optimization")
    model = Manual()
    before = model.layer.weight.detach().clone()
    trainer.fit(model)
    assert trainer.global_step == 3 and not torch.equal(before, model.layer.weight)
    assert model.automatic_optimization is False  # 1.x's module read the switch from its Trainer


def test_distributed_backend_is_1x_accelerator() -> None:
    with pytest.warns(DDPKitDeprecationWarning) as record:
        trainer = Trainer(distributed_backend="ddp_cpu", num_processes=2, logger=False)
    messages = [str(w.message) for w in record]
    assert any(
        m.startswith("Trainer(distributed_backend='ddp_cpu'): removed in Lightning 1.5")
        for m in messages
    )
    assert trainer.plan is not None and trainer.plan.call.startswith(
        "Trainer(accelerator='ddp_cpu'"
    )
    assert trainer.strategy._start_method == "spawn"


def test_every_1x_keyword_of_the_table_is_known_to_the_trainer() -> None:
    from ddpkit.lightning._translate import LIGHTNING_KEYWORDS

    removed = {name for name, row in KEYWORDS.items() if not row.kept}
    kept = {name for name, row in KEYWORDS.items() if row.kept}
    assert not removed & set(LIGHTNING_KEYWORDS)  # 2.x really removed them
    assert kept <= set(LIGHTNING_KEYWORDS)
