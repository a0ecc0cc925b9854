"""The same module, data, callbacks and logger under real Lightning 2.x and under ddpkit, and what
each run leaves behind, in one comparable form (tests/callbacks/test_same_as_lightning.py, the
generated grid of tests/callbacks/test_grid_*.py).

A *spec* says what the module logs and how it optimizes (tests/callbacks/twin_module.py);
:func:`run` builds the module on ``pytorch_lightning.LightningModule`` or ``ddpkit.Module``, a
recording logger and a watching callback on each library's base classes (tests/callbacks/
twin_read.py), runs the calls and returns :class:`Effects`; tests/callbacks/twin_compare.py
compares two of them.
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

import twin_read
from twin_module import LOGS, data, twin_module

import ddpkit
import ddpkit.loggers
from ddpkit.callbacks import Callback

pl = __import__("pytest").importorskip("pytorch_lightning", reason="no `lightning` extra")

__all__ = ["CALLS", "LOGS", "Effects", "data", "pl", "run"]

#: the trainer attributes read after the run
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

#: every call a case may list: a Trainer method on the case's loaders, or
#: ``fit_one_epoch`` (a new Trainer's fit with max_epochs=1, to resume from) and ``resume`` (a
#: new Trainer's fit from the ModelCheckpoint's last file)
CALLS = (
    "fit",
    "fit_one_epoch",
    "resume",
    "validate",
    "validate_verbose",
    "test",
    "test_verbose",
    "predict",
)


@dataclass
class Effects:
    """What one run leaves behind, comparable across the two libraries."""

    callback_metrics: dict[str, float] = field(default_factory=dict)
    logged_metrics: dict[str, float] = field(default_factory=dict)
    progress_bar_metrics: dict[str, float] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    state: tuple[Any, ...] = ()
    weights: Any = None
    results: list[Any] = field(default_factory=list)
    predictions: list[Any] = field(default_factory=list)
    rows: list[tuple[int | None, dict[str, float]]] = field(default_factory=list)
    hparams: list[dict[str, Any]] = field(default_factory=list)
    seen: list[tuple[Any, ...]] = field(default_factory=list)
    stages: list[tuple[str, list[str]]] = field(default_factory=list)
    """Each call, with the stages that started in it (twin_read.STAGE_STARTS)."""
    printed: str = ""
    info: list[str] = field(default_factory=list)
    checkpoint: dict[str, Any] = field(default_factory=dict)
    """Every checkpoint file's contents, by its path (twin_read.checkpoint_contents)."""
    lrs: dict[str, list[float]] = field(default_factory=dict)
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    """EarlyStopping's and ModelCheckpoint's state (file names without their folder)."""
    loader_calls: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    """A refusal: the call, the exception's type (its MRO's qualified names) and message."""


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


def _callbacks(lib: Any, callbacks: Any) -> list[Any]:
    """``callbacks``: a function of the library, or (class name, keywords) pairs."""
    if callbacks is None:
        return []
    if callable(callbacks):
        return list(callbacks(lib))
    return [getattr(lib.callbacks, name)(**kwargs) for name, kwargs in callbacks]


def _call(lib: Any, trainer: Any, call: str, model: Any, loaders: Callable[..., Any],
          common: dict[str, Any], effects: Effects) -> Any:  # fmt: skip
    """Runs one call; returns the trainer the next call uses."""
    own = loaders is None
    fit_loaders = () if own else (loaders(train=True), loaders(train=False))
    if call == "fit_one_epoch":
        trainer = lib.Trainer(**{**common, "max_epochs": 1})
    elif call == "resume":
        last = trainer.checkpoint_callback.last_model_path
        trainer = lib.Trainer(**common)
        trainer.fit(model, *fit_loaders, ckpt_path=last)
        return trainer
    if call in ("fit", "fit_one_epoch"):
        trainer.fit(model, *fit_loaders)
    elif call == "predict":
        found = trainer.predict(model, None if own else loaders(train=False))
        effects.predictions.append(twin_read.plain(found))
    else:
        method = call.removesuffix("_verbose")
        found = getattr(trainer, method)(
            model, None if own else loaders(train=False), verbose=call.endswith("_verbose")
        )
        effects.results.append(twin_read.plain(found))
    return trainer


def run(
    kind: str,
    root: Path,
    calls: list[str],
    *,
    logs: list[tuple[str, str, dict[str, Any]]] | None = None,
    module: dict[str, Any] | None = None,
    callbacks: Any = None,
    loader: dict[str, Any] | None = None,
    **options: Any,
) -> Effects:
    """``calls``: names of :data:`CALLS`. ``callbacks``: extra callbacks (see
    :func:`_callbacks`). ``loader``: keywords of :func:`twin_module.data` for every loader (the
    training loader's ``shuffle`` and sampler apply to it alone); with ``module={"own_loaders":
    ...}`` the module's hooks make them instead. Other keywords go to the Trainer."""
    unknown = [c for c in calls if c not in CALLS]
    if unknown:  # a mistake of the case, never a refusal to compare
        raise ValueError(f"calls {unknown} are not among {CALLS}")
    lib: Any = pl if kind == "lightning" else ddpkit
    base_callback = pl.Callback if kind == "lightning" else Callback
    base_logger = pl.loggers.Logger if kind == "lightning" else ddpkit.loggers.Logger
    base_module = pl.LightningModule if kind == "lightning" else ddpkit.Module
    effects = Effects()
    extra: list[Any] = []
    logger = options.pop("logger", None)
    folder = root / kind
    common = {
        "accelerator": "cpu",
        "devices": 1,
        "logger": twin_read.recording_logger(base_logger, effects) if logger is None else logger,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "default_root_dir": folder,
        "callbacks": [twin_read.watching_callback(base_callback, effects)],
        **options,
    }
    spec = dict(module or {})
    model = twin_module(base_module, LOGS if logs is None else logs, **spec)
    own = spec.get("own_loaders") is not None
    loaders = None if own else (lambda train: data(**(loader or {}), train=train))
    trainer: Any = None
    printed = io.StringIO()
    step = "callbacks"  # a callback's refusal is at its construction
    with (
        warnings.catch_warnings(),
        _info_lines(effects, folder),
        contextlib.redirect_stdout(printed),
    ):
        warnings.simplefilter("ignore")  # Lightning's advice about workers and batch sizes
        try:
            extra += _callbacks(lib, callbacks)
            common["callbacks"] += extra
            step = "Trainer"
            trainer = lib.Trainer(**common)
            for step in calls:
                effects.stages.append((step, []))
                trainer = _call(lib, trainer, step, model, loaders, common, effects)
        except Exception as error:  # compared: its call, its type and its message
            effects.error = {
                "call": step,
                "mro": [f"{c.__module__}.{c.__qualname__}" for c in type(error).__mro__],
                "message": str(error).replace(str(folder), "<root>"),
            }
    effects.printed = printed.getvalue()
    effects.loader_calls = list(model.loader_calls)
    effects.weights = twin_read.plain(dict(model.state_dict()))
    if trainer is not None:
        _read(trainer, effects, extra, folder)
    return effects


def _read(trainer: Any, effects: Effects, extra: list[Any], folder: Path) -> None:
    for name in ("callback_metrics", "logged_metrics", "progress_bar_metrics"):
        setattr(effects, name, twin_read.plain(dict(getattr(trainer, name))))
    for name in ATTRIBUTES:
        try:
            value = getattr(trainer, name)
        except Exception as error:  # an attribute one refuses to give is compared too
            value = f"<{type(error).__name__}>"
        effects.attributes[name] = twin_read.plain(value)
    effects.state = twin_read.state_of(trainer)
    for callback in extra:
        if hasattr(callback, "lrs"):
            effects.lrs = {k: [round(float(v), 6) for v in vs] for k, vs in callback.lrs.items()}
        found = twin_read.callback_state(callback)
        if found is not None:
            effects.callbacks.append(found)
    batches = effects.attributes["num_training_batches"]
    effects.checkpoint = twin_read.checkpoints(folder, batches) if folder.is_dir() else {}
