"""fit / validate / test / predict, as run on each rank, with Lightning's stage hooks.

A stage: the process group up; the module attached; ``configure_callbacks`` merged; the
loggers told the rank and version; ``prepare_data`` (one process per node, the others wait);
``setup`` on the DataModule, the callbacks and the module; ``configure_model``; a checkpoint's
weights and callback states; the module on its device; then for ``fit``:
``configure_optimizers``, ``on_fit_start``, the hyperparameters to the loggers, the training
state, the sanity check, the epochs, ``on_fit_end``. Last, ``teardown`` and the loggers'
``finalize``. An exception calls ``on_exception`` on every callback first. While it runs, the
stage holds the process-wide torch settings it asks for (``deterministic``, ``benchmark``) and
gives them back afterwards.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn

from ddpkit._runtime.ranks._protocol import skip_stage
from ddpkit._runtime.restart.attempt import current_attempt
from ddpkit._runtime.restart.in_process import InProcessAttempts
from ddpkit._runtime.restart.resume import Resume
from ddpkit.callbacks._dispatch import merge_callbacks, module_hook
from ddpkit.core._module import Module
from ddpkit.core._saving import load_checkpoint
from ddpkit.errors import DDPKitWarning, MisconfigurationError
from ddpkit.loggers._csv import CSVLogger, ExperimentWriter
from ddpkit.plugins.training_type.ddp import DDPPlugin
from ddpkit.trainer._checkpoint import restore_model, restore_training
from ddpkit.trainer._config import LoopConfig
from ddpkit.trainer._context import StageContext
from ddpkit.trainer._data import TrainLoader, find_loader, no_data, num_batches
from ddpkit.trainer._evaluation import evaluate, predict
from ddpkit.trainer._fit_port import LoopFit
from ddpkit.trainer._lightning_loops import restart_stage
from ddpkit.trainer._optim import check_automatic, parse_optimizers
from ddpkit.trainer._optimization import StepModule
from ddpkit.trainer._progress import ProgressBar
from ddpkit.trainer._protocols import LoopTrainer
from ddpkit.trainer._state import LoopState, StageOutput
from ddpkit.trainer._training import FitLoop
from ddpkit.utilities import _rng as rng
from ddpkit.utilities._rank_zero import rank_zero_warn


@dataclass
class StageRequest:
    """One call of fit / validate / test / predict, as the Trainer resolved it."""

    fn: str
    model: nn.Module
    loaders: tuple[Any, Any]
    datamodule: Any
    ckpt_path: str | None
    weights_only: bool
    return_state: bool
    return_predictions: bool = True
    #: a fit's attempts, where the launching process runs them itself (it keeps the fit's start)
    attempts: InProcessAttempts = field(default_factory=InProcessAttempts)
    #: a second fit: the counters the earlier fits ended on (Lightning's fit loop goes on)
    progress: dict[str, Any] | None = None


def run_stage(
    trainer: LoopTrainer, state: LoopState, config: LoopConfig, request: StageRequest
) -> StageOutput:
    """The body every rank runs for one stage; sets up and tears down the process group."""
    plugin = trainer.strategy
    if isinstance(plugin, DDPPlugin) and skip_stage():
        # A restarted job's child: this stage of the script ended before the failure.
        return StageOutput(result=[] if request.fn in ("validate", "test") else None)
    fit = LoopFit.of(request.fn, plugin, state, request.model, request.datamodule)
    return request.attempts.run(fit, lambda: _stage(trainer, state, config, request))


def _stage(
    trainer: LoopTrainer, state: LoopState, config: LoopConfig, request: StageRequest
) -> StageOutput:
    plugin = trainer.strategy
    with (
        plugin.running(),
        _deterministic(config.deterministic, plugin.root_device),
        _benchmark(config),
    ):
        ctx = _begin(trainer, state, config, request)
        try:
            result = _run(ctx, request)
        except BaseException as exception:
            # Lightning's: interrupted, the stage's flags still set, then on_exception
            state.status.status = "interrupted"
            try:
                ctx.dispatch.call_callbacks("on_exception", exception)
            finally:
                state.end("interrupted")
            for logger in state.loggers:
                logger.finalize("failed")
            raise
        _teardown(ctx, request.fn)
        return _output(ctx, request, result)


@contextlib.contextmanager
def _deterministic(enabled: bool | str, device: torch.device) -> Iterator[None]:
    """``Trainer(deterministic=True)`` (or "warn"): deterministic algorithms for the stage, then
    the process's own setting again (it is global state; a later stage or test must not inherit
    it). cuBLAS is deterministic only with a fixed workspace, so a CUDA stage also sets
    ``CUBLAS_WORKSPACE_CONFIG`` unless the user did."""
    if not enabled:
        yield
        return
    previous = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    set_cublas = device.type == "cuda" and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    if set_cublas:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True, warn_only=enabled == "warn")
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=warn_only)
        if set_cublas:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


@contextlib.contextmanager
def _benchmark(config: LoopConfig) -> Iterator[None]:
    """``Trainer(benchmark=...)``: cuDNN's autotuner for the stage (off when deterministic)."""
    wanted = config.benchmark
    if wanted is None and config.deterministic:
        wanted = False
    if wanted is None:
        yield
        return
    previous = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = wanted
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = previous


def _begin(
    trainer: LoopTrainer, state: LoopState, config: LoopConfig, request: StageRequest
) -> StageContext:
    model = request.model
    state.begin(request.fn)
    state.metrics.reduce = trainer.strategy.all_reduce
    state.datamodule = request.datamodule
    if isinstance(model, Module):
        model.trainer = trainer  # duck-typed modules keep their own attributes
    if request.datamodule is not None and hasattr(request.datamodule, "trainer"):
        request.datamodule.trainer = trainer
    configure = module_hook(model, "configure_callbacks")
    if configure is not None:
        state.callbacks[:] = merge_callbacks(state.callbacks, configure())
    state.progress = ProgressBar(config.enable_progress_bar and trainer.is_global_zero)
    # Every rank names the run as rank zero does (a version resolved by scanning folders could
    # differ on a rank that looks after rank zero created its folder). No logger, no collective:
    # a stage starts with none, so a rank left alone in it can still be ended cleanly.
    versions: list[Any] = []
    if state.loggers:
        # JSON, not a pickle (ddpkit's own exchanges never unpickle): only ddpkit's loggers take
        # a version (``attach``), an int or a str.
        versions = [
            getattr(lg, "version", None)
            if trainer.is_global_zero and callable(getattr(lg, "attach", None))
            else None
            for lg in state.loggers
        ]
        versions = trainer.strategy.broadcast_json(versions)
    for logger, version in zip(state.loggers, versions):
        attach = getattr(logger, "attach", None)
        if callable(attach):
            attach(trainer.global_rank, version)
        begin_run = getattr(logger, "begin_run", None)
        if callable(begin_run):  # a fit that resumes nothing starts a metrics file of its own;
            # a restarted one goes on in the file its first attempt wrote (nothing lost)
            new = request.fn == "fit" and request.ckpt_path is None
            begin_run(new and current_attempt().number == 0)
    ctx = StageContext(trainer, state, config, trainer.strategy, trainer.precision_plugin, model)
    state.dispatcher = ctx.dispatch
    return ctx


def _prepare_data(ctx: StageContext) -> None:
    plugin = ctx.plugin
    for source in (ctx.state.datamodule, ctx.model):
        hook = module_hook(source, "prepare_data") if source is not None else None
        if hook is None:
            continue
        per_node = getattr(source, "prepare_data_per_node", True)
        if (plugin.local_rank == 0) if per_node else plugin.is_global_zero:
            hook()
        plugin.barrier("prepare_data")


def _setup(ctx: StageContext, fn: str) -> None:
    dispatch = ctx.dispatch
    datamodule = ctx.state.datamodule
    if datamodule is not None and module_hook(datamodule, "setup") is not None:
        datamodule.setup(stage=fn)
    dispatch.call_callbacks("setup", fn)
    dispatch.call_module("setup", fn)
    dispatch.call_module("configure_model")


def _run(ctx: StageContext, request: StageRequest) -> Any:
    state, fn = ctx.state, request.fn
    _prepare_data(ctx)
    _setup(ctx, fn)
    fit = LoopFit.of(fn, ctx.plugin, state, request.model, request.datamodule)
    resume = Resume(request.ckpt_path) if fit is None else Resume.decide(fit, request.ckpt_path)
    checkpoint = None
    state.ckpt_path = resume.path  # None when this stage loads none (Lightning's)
    if resume.path is not None:
        ctx.info(f"Restoring states from the checkpoint path at {resume.path}")
        checkpoint = load_checkpoint(resume.path, weights_only=request.weights_only)
        restore_model(checkpoint, ctx.model, ctx.dispatch, state, callbacks=fn == "fit")
        if fn != "fit":
            ctx.info(f"Loaded model weights from the checkpoint at {resume.path}")
    if fit is not None:
        resume.announce(fit, checkpoint)
    # Lightning's: the previous stage's metrics stay readable until the stage's setup hooks and
    # its checkpoint are done (a callback's setup may read them)
    state.metrics.reset()
    model = ctx.precision.convert_module(ctx.model)
    model.to(ctx.plugin.root_device)
    state.model = model
    if fn == "fit":
        _fit(ctx, request, checkpoint, resume.before_epochs(ctx.plugin, checkpoint))
        return None
    state.status.stage = fn
    kind = "val" if fn == "validate" else fn
    limit = getattr(ctx.config, f"limit_{kind}_batches")
    if limit == 0 and fn != "predict":
        return []  # Lightning's: no loader asked for, no evaluation hooks, no results
    loader = find_loader(fn, request.loaders[0], state.datamodule, model)
    _require(loader, fn)
    prepared = ctx.prepare(loader, train=False, predict=fn == "predict", kind=kind)
    if fn == "predict":
        return predict(ctx, prepared, limit, request.return_predictions)
    return [evaluate(ctx, fn, prepared, limit)]


def _require(loader: Any, fn: str) -> None:
    if loader is None:
        raise no_data(fn)


def _fit(ctx: StageContext, request: StageRequest, checkpoint: Any, before_epochs: Any) -> None:
    """``before_epochs``: called just before the first epoch (a restart's RNG states)."""
    state, config, model = ctx.state, ctx.config, ctx.model
    _check_automatic_optimization(model)
    # 1.x: a training type may ask for the optimizers after the model is wrapped
    # (``setup_optimizers_in_pre_dispatch``), so on_fit_start runs before they exist.
    late = bool(getattr(ctx.plugin, "setup_optimizers_in_pre_dispatch", False))

    def make_train() -> Any:
        found = find_loader("train", request.loaders[0], state.datamodule, model)
        _require(found, "fit")
        return ctx.prepare(found, train=True, kind="train")

    train_loader = TrainLoader(make_train, config.limit_train_batches)
    state.training_batches = train_loader.batches
    optimizers, schedulers = ([], []) if late else _optimizers(ctx)
    state.restore_fit_progress(request.progress)
    step_module = StepModule(model)
    wrapped = ctx.plugin.wrap_model(step_module)
    ctx.dispatch.call("on_fit_start")
    if late:
        optimizers, schedulers = _optimizers(ctx)
    _log_hyperparams(ctx)
    start_epoch = state.epochs_completed
    state.restarting = state.restarted_mid_epoch = False
    if checkpoint is not None:
        start_epoch = _resume_fit(ctx, state.ckpt_path, checkpoint, optimizers, schedulers)

    def val_loader() -> Any:
        found = find_loader("validate", request.loaders[1], state.datamodule, model)
        return ctx.prepare(found, train=False, kind="val") if found is not None else None

    validation = _validation_defined(ctx, request)
    val = None
    if validation and config.num_sanity_val_steps and not state.restarting:
        with rng.isolated():  # Lightning's: the same seed trains alike with or without it
            val = _sanity_check(ctx, val_loader)
    loop = FitLoop(ctx, optimizers, schedulers, wrapped, step_module)
    state.status.stage = "train"
    state.training_batches = None  # from here the loop counts them (num_training_batches)
    with torch.autograd.set_detect_anomaly(config.detect_anomaly):
        sanity = [val] if val is not None else []  # the sanity check's loader, used first
        get_val = lambda: sanity.pop() if sanity else val_loader()  # noqa: E731
        loop.run(
            train_loader,
            get_val,
            validation,
            start_epoch,
            val_loaded=val is not None,
            before_epochs=before_epochs,
            skip_batches=state.epoch_batches,
        )
    state.current_epoch = max(state.current_epoch, start_epoch)
    ctx.dispatch.call("on_fit_end")
    _warn_if_no_step_rows(ctx)
    state.progress.fit_end(ctx.trainer)


def _check_automatic_optimization(model: Any) -> None:
    """ddpkit's loop optimizes automatically; a module that asks otherwise is refused."""
    if not getattr(model, "automatic_optimization", True):
        raise MisconfigurationError(
            f"{type(model).__name__}.automatic_optimization = False: ddpkit's loop runs "
            f"automatic optimization only. Fix: subclass pytorch_lightning.LightningModule and "
            f"train it with ddpkit.lightning.Trainer (manual optimization), or leave it True."
        )


def _resume_fit(
    ctx: StageContext,
    ckpt_path: Any,
    checkpoint: dict[str, Any],
    optimizers: list[Any],
    schedulers: list[Any],
) -> int:
    """What ``fit`` does with the checkpoint it resumes from, before its first epoch: the
    training state restored, Lightning's check that the checkpoint is not past ``max_epochs``,
    its INFO line; the epoch the loop starts at."""
    state, config = ctx.state, ctx.config
    start_epoch = restore_training(checkpoint, state, optimizers, schedulers, ctx.precision)
    state.restarting, state.restarted_mid_epoch, one_more = restart_stage(
        checkpoint, config.max_steps
    )
    state.batches_stepped += one_more  # (Lightning's: the step row the batch writes)
    if "loops" in checkpoint:
        # Lightning's: until training goes on, the epoch is the one that wrote the checkpoint
        # (its sanity check runs in it); the loop then starts at start_epoch.
        state.current_epoch = int(checkpoint.get("epoch", start_epoch))
    if 0 <= config.max_epochs < state.current_epoch:
        raise MisconfigurationError(
            f"Trainer(max_epochs={config.max_epochs}).fit(ckpt_path={ckpt_path!r}): "
            f"You restored a checkpoint with current_epoch={state.current_epoch}, but you have "
            f"set Trainer(max_epochs={config.max_epochs}) (Lightning's check). Fix: "
            f"Trainer(max_epochs={state.current_epoch + 1}) or more, or another checkpoint."
        )
    ctx.info(f"Restored all states from the checkpoint at {ckpt_path}")
    return start_epoch


def _optimizers(ctx: StageContext) -> tuple[list[Any], list[Any]]:
    """``configure_optimizers``, parsed, and what automatic optimization cannot step refused."""
    model = ctx.model
    ctx.state.metrics.fx = "configure_optimizers"  # (a new stage's store starts without it)
    optimizers, schedulers = parse_optimizers(cast(Any, model).configure_optimizers())
    ctx.state.metrics.fx = None
    check_automatic(type(model).__name__, optimizers)
    ctx.state.optimizers, ctx.state.lr_scheduler_configs = optimizers, schedulers
    return optimizers, schedulers


def _validation_defined(ctx: StageContext, request: StageRequest) -> bool:
    """Validation runs in fit: a val loader (given or from a hook), a validation_step, and
    limit_val_batches ≠ 0 — decided without calling the loader hook (Lightning's rule)."""
    if ctx.config.limit_val_batches == 0 or module_hook(ctx.model, "validation_step") is None:
        return False
    if request.loaders[1] is not None:
        return True
    return any(
        source is not None and module_hook(source, "val_dataloader") is not None
        for source in (ctx.state.datamodule, ctx.model)
    )


def _sanity_check(ctx: StageContext, get_val: Any) -> Any:
    """A few validation batches before training, logging nothing; returns the val loader."""
    state = ctx.state
    steps = ctx.config.num_sanity_val_steps
    state.status.stage = "sanity_check"
    ctx.dispatch.call_callbacks("on_sanity_check_start")
    loader = get_val()
    if loader is not None:
        limit = ctx.config.limit_val_batches
        n_val = num_batches(loader, limit, "val")
        n = n_val if steps == -1 else (steps if n_val is None else min(steps, n_val))
        # the fit's validation count (Lightning's: the sanity check makes the loader)
        state.num_val_batches = [n_val if n_val is not None else math.inf]
        evaluate(ctx, "validate", loader, n, sanity=True)
    ctx.dispatch.call_callbacks("on_sanity_check_end")
    state.status.stage = "train"
    state.metrics.reset()
    return loader


def _log_hyperparams(ctx: StageContext) -> None:
    """The module's (and DataModule's) hyperparameters to every logger, as Lightning does."""
    if not ctx.config.enable_autolog_hparams or not ctx.state.loggers:
        return
    params: dict[str, Any] = {}
    for source in (ctx.model, ctx.state.datamodule):
        if source is not None and getattr(source, "log_hyperparameters", False):
            params.update(dict(getattr(source, "hparams_initial")))  # noqa: B009
    for logger in ctx.state.loggers:
        if params:
            logger.log_hyperparams(params)
        logger.log_graph(ctx.model)
        logger.save()


def _warn_if_no_step_rows(ctx: StageContext) -> None:
    """Nothing of the steps reached the loggers: say so once, and where the epoch values are."""
    state, every = ctx.state, ctx.config.log_every_n_steps
    if not (every and state.loggers and state.metrics.logged_step_value and state.step_rows == 0):
        return
    if not ctx.plugin.is_global_zero or ctx.config.fast_dev_run:
        return
    where = ", ".join(_where(logger) for logger in state.loggers)
    went = f"the epoch values are in {where}" if state.epoch_rows else f"nothing reached {where}"
    rank_zero_warn(
        f"Trainer(log_every_n_steps={every}): this fit made {state.global_step} optimizer steps, "
        f"fewer than {every}, so no step value was logged; {went}. "
        f"Fix: Trainer(log_every_n_steps={max(1, state.global_step)}) or lower.",
        DDPKitWarning,
    )


def _where(logger: Any) -> str:
    folder = getattr(logger, "log_dir", None)
    if folder is None:
        return type(logger).__name__
    if isinstance(logger, CSVLogger):
        return os.path.join(os.path.normpath(str(folder)), ExperimentWriter.NAME_METRICS_FILE)
    return os.path.normpath(str(folder))


def _teardown(ctx: StageContext, fn: str) -> None:
    state, dispatch = ctx.state, ctx.dispatch
    datamodule = state.datamodule
    if datamodule is not None and module_hook(datamodule, "teardown") is not None:
        datamodule.teardown(stage=fn)
    dispatch.call_callbacks("teardown", fn)
    dispatch.call_module("teardown", fn)
    for logger in state.loggers:
        logger.finalize("success")
    state.end("finished")
    state.dispatcher = None


def _output(ctx: StageContext, request: StageRequest, result: Any) -> StageOutput:
    state = ctx.state
    output = StageOutput(result=result)
    output.callback_metrics = dict(state.metrics.callback_metrics)
    output.logged_metrics = dict(state.metrics.logged_metrics)
    if request.return_state and ctx.plugin.is_global_zero:
        output.state = state.portable()
        output.callbacks = list(state.callbacks)
        output.loggers = list(state.loggers)
        model = state.model if state.model is not None else ctx.model
        output.state_dict = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return output
