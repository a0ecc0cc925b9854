"""The same module, data, callbacks and logger under real Lightning 2.x and under ddpkit, and what
each run leaves behind, in one comparable form (tests/callbacks/test_same_as_lightning.py).

A *spec* says what the module logs and how it optimizes; :func:`run` builds the module on
``pytorch_lightning.LightningModule`` or ``ddpkit.Module``, a recording logger and a watching
callback on each library's base classes, runs the calls and returns :class:`Effects`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
import ddpkit.loggers
from ddpkit.callbacks import Callback

pl = __import__("pytest").importorskip("pytorch_lightning", reason="no `lightning` extra")

#: (hook, name, self.log keywords): what the module logs by default
LOGS: list[tuple[str, str, dict[str, Any]]] = [
    ("training_step", "loss", {}),
    ("training_step", "train_acc", {"on_step": True, "on_epoch": True, "prog_bar": True}),
    ("training_step", "hidden", {"logger": False, "on_epoch": True}),
    ("validation_step", "val_loss", {"prog_bar": True}),
    ("validation_step", "val_max", {"reduce_fx": "max"}),
    ("on_validation_epoch_end", "val_epoch_end", {}),
    ("on_train_epoch_end", "train_epoch_end", {}),
    ("test_step", "test_loss", {}),
    ("test_step", "test_quiet", {"logger": False}),
]

ATTRIBUTES = (
    "current_epoch",
    "global_step",
    "max_epochs",
    "max_steps",
    "min_epochs",
    "min_steps",
    "num_training_batches",
    "num_val_batches",
    "num_sanity_val_batches",
    "num_test_batches",
    "num_predict_batches",
    "check_val_every_n_epoch",
    "val_check_interval",
    "val_check_batch",
    "log_every_n_steps",
    "limit_train_batches",
    "limit_val_batches",
    "num_sanity_val_steps",
    "accumulate_grad_batches",
    "should_stop",
    "is_last_batch",
    "sanity_checking",
    "training",
    "validating",
    "testing",
    "predicting",
    "fast_dev_run",
    "world_size",
    "global_rank",
    "local_rank",
    "node_rank",
    "num_nodes",
    "num_devices",
    "is_global_zero",
    "interrupted",
)


@dataclass
class Effects:
    """What one run leaves behind, comparable across the two libraries."""

    callback_metrics: dict[str, float] = field(default_factory=dict)
    logged_metrics: dict[str, float] = field(default_factory=dict)
    progress_bar_metrics: dict[str, float] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    state: tuple[Any, ...] = ()
    results: list[Any] = field(default_factory=list)
    rows: list[tuple[int | None, dict[str, float]]] = field(default_factory=list)
    hparams: list[dict[str, Any]] = field(default_factory=list)
    seen: list[tuple[Any, ...]] = field(default_factory=list)
    printed: str = ""
    info: list[str] = field(default_factory=list)
    checkpoint: dict[str, Any] = field(default_factory=dict)
    lrs: dict[str, list[float]] = field(default_factory=dict)
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    """EarlyStopping's and ModelCheckpoint's state (file names without their folder)."""
    error: str | None = None


def _floats(metrics: Any) -> dict[str, float]:
    # 4 decimals: ddpkit accumulates epoch means in float64, Lightning in float32
    return {k: round(float(v), 4) for k, v in sorted(dict(metrics).items())}


def recording_logger(base: type, store: Effects) -> Any:
    class Recording(base):  # type: ignore[misc, valid-type]
        @property
        def name(self) -> str:
            return "twin"

        @property
        def version(self) -> int:
            return 0

        def log_metrics(self, metrics: Any, step: Any = None) -> None:
            store.rows.append((step, _floats(metrics)))

        def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
            store.hparams.append(dict(vars(params) if hasattr(params, "__dict__") else params))

    return Recording()


WATCHED_HOOKS = (
    "on_sanity_check_start",
    "on_train_start",
    "on_validation_start",
    "on_validation_epoch_end",
    "on_validation_end",
    "on_train_epoch_end",
    "on_test_start",
    "on_test_epoch_end",
    "on_predict_start",
    "on_fit_start",
)


def watching_callback(base: type, store: Effects) -> Any:
    """Records, at a few hooks, what a callback would read from the trainer."""

    def make(hook: str) -> Callable[..., None]:
        def watch(self: Any, trainer: Any, pl_module: Any, *args: Any) -> None:
            store.seen.append(
                (
                    hook,
                    trainer.current_epoch,
                    trainer.global_step,
                    trainer.sanity_checking,
                    tuple(trainer.num_val_batches),
                    tuple(trainer.num_test_batches),
                    len(trainer.optimizers),
                    tuple(sorted(_floats(trainer.callback_metrics).items())),
                )
            )

        return watch

    return type("Watching", (base,), {hook: make(hook) for hook in WATCHED_HOOKS})()


def twin_module(base: type, logs: list[tuple[str, str, dict[str, Any]]], **spec: Any) -> Any:
    """A linear regression whose hooks log ``logs``; ``spec``: ``optimizers`` (1 or 2),
    ``scheduler`` (a dict of the scheduler config, or None), ``param_groups`` (names or None)."""

    def log_all(self: Any, hook: str, value: torch.Tensor) -> None:
        for where, name, kwargs in logs:
            if where == hook:
                self.log(name, value + len(name) * 0.01, **kwargs)

    class Twin(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = nn.Linear(2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = F.mse_loss(self(x), y)
            log_all(self, "training_step", loss.detach())
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            log_all(self, "validation_step", F.mse_loss(self(x), y))

        def test_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            log_all(self, "test_step", F.mse_loss(self(x), y))

        def on_validation_epoch_end(self) -> None:
            log_all(self, "on_validation_epoch_end", torch.tensor(float(self.current_epoch)))

        def on_train_epoch_end(self) -> None:
            log_all(self, "on_train_epoch_end", torch.tensor(float(self.current_epoch)))

        def configure_optimizers(self) -> Any:
            groups = spec.get("param_groups")
            params: Any = self.parameters()
            if groups:
                weights, bias = self.layer.weight, self.layer.bias
                params = [
                    {"params": [weights], **({"name": groups[0]} if groups[0] else {})},
                    {"params": [bias], "lr": 0.01, **({"name": groups[1]} if groups[1] else {})},
                ]
            kind = spec.get("optimizer", "sgd")
            make = (
                (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9))
                if kind == "sgd"
                else (lambda p: torch.optim.Adam(p, lr=0.1))
                if kind == "adam"
                else (lambda p: torch.optim.Adagrad(p, lr=0.1))
            )
            optimizers = [make(params) for _ in range(spec.get("optimizers", 1))]
            scheduler = spec.get("scheduler")
            if scheduler is None:
                return optimizers if len(optimizers) > 1 else optimizers[0]
            step = torch.optim.lr_scheduler.StepLR(optimizers[0], step_size=1, gamma=0.5)
            return {"optimizer": optimizers[0], "lr_scheduler": {"scheduler": step, **scheduler}}

    return Twin()


def data(n: int = 16, batch: int = 4, shuffle: bool = False) -> DataLoader[Any]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 2, generator=g)
    dataset = TensorDataset(x, x @ torch.tensor([[2.0], [-1.0]]))
    return DataLoader(dataset, batch_size=batch, shuffle=shuffle)


@contextlib.contextmanager
def _info_lines(store: Effects, root: Path) -> Iterator[None]:
    """The INFO lines either library logs (Lightning's "`Trainer.fit` stopped: ...")."""

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            store.info.append(record.getMessage().replace(str(root), "<root>"))

    handler = Keep(logging.INFO)
    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "pytorch_lightning", "ddpkit")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def run(
    kind: str,
    root: Path,
    calls: list[str],
    *,
    logs: list[tuple[str, str, dict[str, Any]]] | None = None,
    module: dict[str, Any] | None = None,
    callbacks: Callable[[Any], list[Any]] | None = None,
    loaders: Callable[[], Any] = data,
    **options: Any,
) -> Effects:
    """``calls``: Trainer methods ("fit", "validate", "test", "predict", "test_verbose",
    "resume" — a new Trainer's fit from the last checkpoint, "fit_one_epoch"). ``callbacks(lib)``: extra
    callbacks of that library. Other keywords go to the Trainer."""
    lib: Any = pl if kind == "lightning" else ddpkit
    base_callback = pl.Callback if kind == "lightning" else Callback
    base_logger = pl.loggers.Logger if kind == "lightning" else ddpkit.loggers.Logger
    base_module = pl.LightningModule if kind == "lightning" else ddpkit.Module
    effects = Effects()
    extra = callbacks(lib) if callbacks is not None else []
    logger = options.pop("logger", None)
    common = {
        "accelerator": "cpu",
        "devices": 1,
        "logger": recording_logger(base_logger, effects) if logger is None else logger,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "default_root_dir": root / kind,
        "callbacks": [watching_callback(base_callback, effects), *extra],
        **options,
    }
    model = twin_module(base_module, LOGS if logs is None else logs, **(module or {}))
    trainer: Any = None
    printed = io.StringIO()
    with (
        warnings.catch_warnings(),
        _info_lines(effects, root / kind),
        contextlib.redirect_stdout(printed),
    ):
        warnings.simplefilter("ignore")  # Lightning's advice about workers and batch sizes
        try:
            trainer = lib.Trainer(**common)
            for call in calls:
                if call == "fit_one_epoch":  # a fit to resume from (max_epochs=1)
                    trainer = lib.Trainer(**{**common, "max_epochs": 1})
                    trainer.fit(model, loaders(), loaders())
                elif call == "resume":
                    last = trainer.checkpoint_callback.last_model_path
                    trainer = lib.Trainer(**common)
                    trainer.fit(model, loaders(), loaders(), ckpt_path=last)
                elif call == "fit":
                    trainer.fit(model, loaders(), loaders())
                elif call.startswith("test") or call == "validate":
                    method = "test" if call.startswith("test") else "validate"
                    verbose = call.endswith("verbose")
                    found = getattr(trainer, method)(model, loaders(), verbose=verbose)
                    effects.results.append([_floats(r) for r in found])
                else:
                    getattr(trainer, call)(model, loaders())
        except Exception as error:  # compared: both refuse, or neither
            effects.error = type(error).__name__
    effects.printed = printed.getvalue()
    if trainer is not None:
        _read(trainer, effects, extra)
    return effects


def _read(trainer: Any, effects: Effects, extra: list[Any]) -> None:
    effects.callback_metrics = _floats(trainer.callback_metrics)
    effects.logged_metrics = _floats(trainer.logged_metrics)
    effects.progress_bar_metrics = _floats(trainer.progress_bar_metrics)
    for name in ATTRIBUTES:
        value = getattr(trainer, name)
        effects.attributes[name] = list(value) if isinstance(value, list) else value
    state = trainer.state
    effects.state = (str(state.fn.value if hasattr(state.fn, "value") else state.fn),
                     str(state.status.value if hasattr(state.status, "value") else state.status),
                     state.finished, state.stopped)  # fmt: skip
    for callback in extra:
        if hasattr(callback, "lrs"):
            effects.lrs = {k: [round(float(v), 6) for v in vs] for k, vs in callback.lrs.items()}
        if hasattr(callback, "stopped_epoch"):
            effects.callbacks.append(
                {
                    "stopped_epoch": callback.stopped_epoch,
                    "wait_count": callback.wait_count,
                    "best_score": round(float(callback.best_score), 4),
                    "reason": callback.stopping_reason.name,
                }
            )
        if hasattr(callback, "best_k_models"):
            effects.callbacks.append(
                {
                    "best": Path(callback.best_model_path).name,
                    "last": Path(callback.last_model_path).name,
                    "kth": Path(callback.kth_best_model_path).name,
                    "best_k": {
                        Path(k).name: round(float(v), 4) for k, v in callback.best_k_models.items()
                    },
                    "score": None
                    if callback.best_model_score is None
                    else round(float(callback.best_model_score), 4),
                    "files": sorted(p.name for p in Path(callback.dirpath).iterdir())
                    if callback.dirpath and Path(callback.dirpath).is_dir()
                    else [],
                }
            )
