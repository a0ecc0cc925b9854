"""``Trainer``: the flags in, a plan resolved, a loop config frozen — and fit / validate / test /
predict launched on every rank."""

from __future__ import annotations

import inspect
import os
from datetime import timedelta
from typing import Any

from torch import nn

from ddpkit._lightning_surface import LightningCounterpart, ReadOnlySettings, check_defined
from ddpkit._runtime.restart.checks import check_restarts
from ddpkit._runtime.restart.resume import rng_states
from ddpkit.accelerators._base import Accelerator
from ddpkit.callbacks._checkpoint import ModelCheckpoint
from ddpkit.callbacks._dispatch import merge_callbacks
from ddpkit.callbacks._summary import ModelSummary
from ddpkit.callbacks._timer import Timer
from ddpkit.connector import AcceleratorConnector, Flags
from ddpkit.connector._flags import DEVICE_FLAGS
from ddpkit.errors import MisconfigurationError
from ddpkit.loggers._csv import CSVLogger
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.trainer._checkpoint import atomic_save, dump_checkpoint, resolve_ckpt_path
from ddpkit.trainer._config import LoopConfig, build_config
from ddpkit.trainer._data import check_no_dataloader_idx
from ddpkit.trainer._evaluation import print_results
from ddpkit.trainer._fit_port import KeptCheckpoint
from ddpkit.trainer._loop import StageRequest, run_stage
from ddpkit.trainer._properties import TrainerProperties
from ddpkit.trainer._stage import check_folders, check_model, folders_of, split_datamodule
from ddpkit.trainer._state import LoopState, StageOutput
from ddpkit.utilities._rank_zero import rank_zero_info
from ddpkit.utilities._reprs import safe_repr


def _default_callbacks(config: LoopConfig) -> list[Any]:
    """The user's callbacks plus Lightning's defaults: a ModelCheckpoint (enable_checkpointing),
    a Timer (max_time, unless the user gave one), a ModelSummary (enable_model_summary);
    checkpoints last."""
    callbacks = list(config.callbacks)
    has_checkpoint = any(isinstance(cb, ModelCheckpoint) for cb in callbacks)
    if has_checkpoint and not config.enable_checkpointing:
        keyword = config.checkpointing_keyword
        flag = f"{keyword}={keyword == 'barebones'}"
        raise MisconfigurationError(
            f"Trainer({flag}, callbacks=[ModelCheckpoint(...)]): Trainer was configured with "
            f"{flag} but found ModelCheckpoint in callbacks list: {flag} turns checkpointing "
            f"off. Fix: drop {flag} (or the ModelCheckpoint)."
        )
    if config.enable_checkpointing and not has_checkpoint:
        callbacks.append(ModelCheckpoint())
    elif config.max_restarts and not has_checkpoint:
        callbacks.append(KeptCheckpoint())  # a restart resumes from ddpkit's own
    if config.max_time is not None:
        if any(isinstance(cb, Timer) for cb in callbacks):
            # Lightning 2.x's rule and words (_configure_timer_callback): the user's Timer is
            # the one that counts; a second would stop the fit by the other's duration too
            rank_zero_info(
                "Ignoring `Trainer(max_time=...)`, callbacks list already contains a Timer."
            )
        else:
            callbacks.append(Timer(duration=config.max_time, interval="step"))
    has_summary = any(isinstance(cb, ModelSummary) for cb in callbacks)
    if config.enable_model_summary and not has_summary:
        callbacks.append(ModelSummary(max_depth=config.summary_depth))
    return merge_callbacks([], callbacks)


def _loggers(config: LoopConfig) -> list[Any]:
    if config.logger is True:
        # <default_root_dir>/metrics.csv, as ddpkit always wrote it
        return [CSVLogger(config.default_root_dir, name="", version="")]
    if config.logger is False:
        return []
    return list(config.logger) if isinstance(config.logger, list) else [config.logger]


def _say_fast_dev_run(config: LoopConfig) -> None:
    if config.fast_dev_run:
        rank_zero_info(
            f"Running in `fast_dev_run` mode: will run the requested loop using "
            f"{config.fast_dev_run} batch(es). Logging and checkpointing is suppressed."
        )


class Trainer(LightningCounterpart, ReadOnlySettings, TrainerProperties):
    """Train a module on one CPU, many CPU processes, GPUs or a cluster — chosen by flags.

    Device flags (see ``docs/flags.md`` for what each combination resolves to): ``accelerator``,
    ``strategy``, ``devices``, ``num_nodes``, ``precision``, ``plugins``, ``sync_batchnorm`` and
    the legacy ``gpus`` and ``num_processes``. Every other keyword is Lightning 2.x's, with
    Lightning's defaults (``docs/training.md``). Building a Trainer checks every keyword, starts
    no process, opens no port and does not initialize CUDA.
    """

    def __init__(
        self,
        *,
        accelerator: str | Accelerator | None = None,
        strategy: str | TrainingTypePlugin | None = None,
        devices: int | str | list[int] | None = None,
        num_nodes: int = 1,
        precision: int | str | None = "32-true",
        logger: Any = None,
        callbacks: Any = None,
        fast_dev_run: int | bool = False,
        max_epochs: int | None = None,
        min_epochs: int | None = None,
        max_steps: int = -1,
        min_steps: int | None = None,
        max_time: str | timedelta | dict[str, int] | None = None,
        limit_train_batches: int | float | None = None,
        limit_val_batches: int | float | None = None,
        limit_test_batches: int | float | None = None,
        limit_predict_batches: int | float | None = None,
        overfit_batches: int | float = 0.0,
        val_check_interval: int | float | None = None,
        check_val_every_n_epoch: int | None = 1,
        num_sanity_val_steps: int | None = None,
        log_every_n_steps: int | None = None,
        enable_checkpointing: bool | None = None,
        enable_progress_bar: bool | None = None,
        enable_model_summary: bool | None = None,
        accumulate_grad_batches: int | dict[int, int] = 1,
        gradient_clip_val: int | float | None = None,
        gradient_clip_algorithm: str | None = None,
        deterministic: bool | str | None = None,
        benchmark: bool | None = None,
        inference_mode: bool = True,
        use_distributed_sampler: bool = True,
        profiler: Any = None,
        detect_anomaly: bool = False,
        barebones: bool = False,
        plugins: Any = None,
        sync_batchnorm: bool = False,
        reload_dataloaders_every_n_epochs: int = 0,
        default_root_dir: str | os.PathLike[str] | None = None,
        enable_autolog_hparams: bool = True,
        model_registry: str | None = None,
        max_restarts: int = 0,
        gpus: int | str | list[int] | None = None,
        num_processes: int | None = None,
        **legacy: Any,
    ) -> None:
        given = dict(locals())
        # The loop keywords first: a bad one is reported before the device flags are resolved.
        self._config = build_config({k: given[k] for k in LOOP_KEYWORDS}, LOOP_KEYWORDS, legacy)
        flags = Flags.of(**{k: given[k] for k in DEVICE_FLAGS})
        self._accelerator_connector = AcceleratorConnector(flags)
        check_restarts(self._config.max_restarts, self._accelerator_connector.plan)
        self._state = LoopState(
            callbacks=_default_callbacks(self._config), loggers=_loggers(self._config)
        )
        _say_fast_dev_run(self._config)

    # -- stages --------------------------------------------------------------------------------

    def fit(
        self,
        model: nn.Module,
        train_dataloaders: Any = None,
        val_dataloaders: Any = None,
        datamodule: Any = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        weights_only: bool = True,
    ) -> None:
        """Train. ``train_dataloaders`` may be a DataModule. ``ckpt_path`` resumes from a
        checkpoint (weights, optimizers, schedulers, callbacks, epoch and step), loaded with
        ``torch.load(weights_only=True)``, which refuses to run code hidden in the file;
        ``weights_only=False`` loads a checkpoint you trust that holds other objects."""
        if ckpt_path is None:
            ckpt_path = self._config.resume_from_checkpoint
        self._launch(
            "fit", model, (train_dataloaders, val_dataloaders), datamodule, ckpt_path, weights_only
        )

    def validate(
        self,
        model: nn.Module | None = None,
        dataloaders: Any = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        verbose: bool = True,
        datamodule: Any = None,
        weights_only: bool = True,
    ) -> list[dict[str, float]]:
        """One validation epoch; ``[{metric: value}]`` (``verbose``: printed as Lightning's
        table, on rank zero). Without a model: the fitted one (with the best checkpoint's
        weights when a ModelCheckpoint saved one, or ``ckpt_path``'s: "best", "last" or a
        path)."""
        return self._launch(  # type: ignore[no-any-return]
            "validate", model, (dataloaders, None), datamodule, ckpt_path, weights_only, verbose
        )

    def test(
        self,
        model: nn.Module | None = None,
        dataloaders: Any = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        verbose: bool = True,
        datamodule: Any = None,
        weights_only: bool = True,
    ) -> list[dict[str, float]]:
        """One test epoch; ``[{metric: value}]`` (the model, ``ckpt_path`` and ``verbose`` as in
        validate)."""
        return self._launch(  # type: ignore[no-any-return]
            "test", model, (dataloaders, None), datamodule, ckpt_path, weights_only, verbose
        )

    def predict(
        self,
        model: nn.Module | None = None,
        dataloaders: Any = None,
        datamodule: Any = None,
        return_predictions: bool | None = None,
        ckpt_path: str | os.PathLike[str] | None = None,
        weights_only: bool = True,
    ) -> list[Any] | None:
        """Every batch's prediction, in the dataset's order — on every rank, the ranks' shards
        gathered (each rank predicts one contiguous block of the dataset)."""
        keep = True if return_predictions is None else bool(return_predictions)
        return self._launch(  # type: ignore[no-any-return]
            "predict", model, (dataloaders, None), datamodule, ckpt_path, weights_only, False, keep
        )

    def _launch(
        self,
        fn: str,
        model: nn.Module | None,
        loaders: tuple[Any, Any],
        datamodule: Any,
        ckpt_path: str | os.PathLike[str] | None,
        weights_only: bool,
        verbose: Any = False,
        return_predictions: bool = True,
    ) -> Any:
        """Everything that can be checked is checked here, before any rank starts.
        ``verbose`` (validate / test): Lightning's results table, printed on rank zero."""
        if not isinstance(verbose, bool):
            raise MisconfigurationError(
                f"Trainer.{fn}(verbose={safe_repr(verbose)}): pass True (print the results "
                f"table) or False. Fix: verbose=True."
            )
        given = model is not None
        model = check_model(fn, model, self._state.model)
        if self.is_global_zero:  # what rank zero will write: checked before any rank starts
            check_folders(fn, folders_of(self, fn, self._state.callbacks, self._state.loggers))
        loaders, datamodule = split_datamodule(fn, loaders, datamodule, model)
        check_defined(model, datamodule, self._state.callbacks)  # Lightning's hooks ddpkit lacks
        check_no_dataloader_idx(model, self._state.callbacks)
        launcher = self._accelerator_connector.built.launcher
        spawn = launcher is not None and launcher.returns_to_parent
        if spawn:
            for logger in self._state.loggers:
                getattr(logger, "version", None)  # resolved here, so the parent knows it too
        request = StageRequest(
            fn=fn,
            model=model,
            loaders=loaders,
            datamodule=datamodule,
            ckpt_path=resolve_ckpt_path(fn, ckpt_path, self._state, given),
            weights_only=weights_only,
            return_state=spawn,
            return_predictions=return_predictions,
            progress=self._state.fit_progress() if fn == "fit" and self._state.fitted else None,
        )
        # The first argument names the stage (the launchers' messages say which one ran).
        if launcher is None:
            output: StageOutput = self._run_stage(fn, request)
        else:
            restarts = self._config.max_restarts if fn == "fit" else 0
            output = launcher.launch(self._run_stage, fn, request, max_restarts=restarts)
        if spawn and output is not None:
            self._adopt(model, datamodule, output)
        result = output.result if output is not None else None
        if verbose and result is not None and self.is_global_zero:
            print_results(result, fn)
        return result

    def _run_stage(self, fn: str, request: StageRequest) -> StageOutput:
        return run_stage(self, self._state, self._config, request)

    def _adopt(self, model: nn.Module, datamodule: Any, output: StageOutput) -> None:
        """Spawn: the parent takes rank zero's weights, metrics, counters, and its callbacks'
        and loggers' state."""
        if output.state_dict is not None:
            model.load_state_dict(output.state_dict)
        self._state.model, self._state.datamodule = model, datamodule
        self._state.metrics.callback_metrics = output.callback_metrics
        self._state.metrics.logged_metrics = output.logged_metrics
        self._state.adopt(output.state, output.callbacks, output.loggers)

    # -- checkpoints ---------------------------------------------------------------------------

    def save_checkpoint(
        self,
        filepath: str | os.PathLike[str],
        weights_only: bool = False,
        storage_options: Any = None,
        *,
        model: nn.Module | None = None,
        barrier: bool = True,
    ) -> None:
        """Write the checkpoint on global rank zero, atomically; the other ranks wait for it
        (``barrier=False``: they do not — for a rank that may be alone, as in ``on_exception``).
        ``weights_only``: the module's weights, hyperparameters and counters only."""
        if storage_options is not None:
            raise MisconfigurationError(
                "Trainer.save_checkpoint(..., storage_options=...): ddpkit writes local files "
                "only. Fix: leave storage_options out."
            )
        target = model if model is not None else self._state.model
        if target is None:
            raise MisconfigurationError(
                "Trainer.save_checkpoint(path): no model yet. Call it during or after fit, or "
                "pass model=..."
            )
        # Every rank builds it (its callbacks' and module's on_save_checkpoint run everywhere, as
        # in Lightning); rank zero writes it.
        checkpoint = dump_checkpoint(
            self._state,
            target,
            self.precision_plugin,
            self._state.dispatcher,
            weights_only=weights_only,
            # every rank's RNG states (gathered: a restart resumes them exactly)
            rng=None if weights_only else rng_states(self.strategy, collective=barrier),
        )
        if self.is_global_zero:
            atomic_save(checkpoint, filepath)
        if barrier:
            self.strategy.barrier("save_checkpoint")


#: Lightning 2.x's loop keywords with Lightning's defaults (None: decided from the others), and
#: ddpkit's own ``max_restarts`` (Lightning has no restarts: docs/reliability.md) — every
#: keyword of ``Trainer.__init__`` but the device flags, as its signature gives them.
LOOP_KEYWORDS: dict[str, Any] = {
    name: parameter.default
    for name, parameter in inspect.signature(Trainer.__init__).parameters.items()
    if parameter.kind is parameter.KEYWORD_ONLY and name not in DEVICE_FLAGS
}
