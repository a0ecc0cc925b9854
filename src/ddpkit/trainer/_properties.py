"""The Trainer's read-only properties (Lightning's names): what the connector built (the plan's
objects and ranks), the loop keywords as resolved (``Trainer(max_steps=3).max_steps == 3``;
``max_epochs`` and ``min_epochs`` not given read None until a fit resolves them, as in
Lightning), and what the loop owns (counters, the stage, metrics, the module, optimizers, callbacks
and loggers; ``should_stop`` can be set).

Most only forward an attribute: each is one :class:`_Forward` line; the rest compute."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import torch
from torch import nn

from ddpkit.accelerators._base import Accelerator
from ddpkit.connector import AcceleratorConnector
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.trainer._config import LoopConfig
from ddpkit.trainer._metrics import MetricStore
from ddpkit.trainer._optim import SchedulerConfig
from ddpkit.trainer._state import LoopState, TrainerState

T = TypeVar("T")


class _Forward(property, Generic[T]):
    """A read-only property whose value is the attribute at ``path`` (``"_config.max_epochs"``),
    or what ``path`` computes from the trainer when it is a function. A ``property`` still:
    setting it raises as setting any read-only property does (and the Lightning surface's checks
    see a property)."""

    def __init__(self, path: str | Callable[[Any], T], doc: str | None = None) -> None:
        super().__init__(operator.attrgetter(path) if isinstance(path, str) else path)
        self.__doc__ = doc

    if TYPE_CHECKING:

        @overload
        def __get__(self, instance: None, owner: type | None = None, /) -> _Forward[T]: ...
        @overload
        def __get__(self, instance: object, owner: type | None = None, /) -> T: ...
        def __get__(self, instance: object | None, owner: type | None = None, /) -> Any: ...


def _limit(kind: str) -> _Forward[int | float]:
    """``limit_<kind>_batches`` as resolved (Lightning's: 1.0, the whole loader, when not
    given)."""
    get = operator.attrgetter(f"_config.limit_{kind}_batches")
    return _Forward(lambda trainer: 1.0 if (found := get(trainer)) is None else found)


def _stage_is(stage: str) -> _Forward[bool]:
    """Whether the running loop stage is ``stage`` (``trainer.training``, ...)."""
    return _Forward(lambda trainer: trainer._state.status.stage == stage)


_BUILT = "_accelerator_connector.built"
_PLUGIN = f"{_BUILT}.training_type"


class TrainerProperties:
    """The Trainer's properties (a base of ``Trainer``)."""

    _accelerator_connector: AcceleratorConnector
    _config: LoopConfig
    _state: LoopState

    # -- what the connector built --------------------------------------------------------------

    accelerator_connector = _Forward[AcceleratorConnector]("_accelerator_connector")
    accelerator = _Forward[Accelerator](f"{_BUILT}.accelerator")
    training_type_plugin = _Forward[TrainingTypePlugin](_PLUGIN)
    strategy = _Forward[TrainingTypePlugin](_PLUGIN)
    precision_plugin = _Forward[PrecisionPlugin](f"{_BUILT}.precision_plugin")
    precision = _Forward[str](f"{_BUILT}.precision_plugin.precision")
    cluster_environment = _Forward[ClusterEnvironment](f"{_BUILT}.cluster_environment")
    num_nodes = _Forward[int](f"{_PLUGIN}.num_nodes")
    num_processes = _Forward[int](f"{_PLUGIN}.num_processes", "Processes per node.")
    world_size = _Forward[int](f"{_PLUGIN}.world_size")
    root_device = _Forward[torch.device](f"{_PLUGIN}.root_device")
    global_rank = _Forward[int](f"{_PLUGIN}.global_rank")
    local_rank = _Forward[int](f"{_PLUGIN}.local_rank")
    node_rank = _Forward[int](f"{_PLUGIN}.node_rank")
    is_global_zero = _Forward[bool](f"{_PLUGIN}.is_global_zero")

    @property
    def num_devices(self) -> int:
        return len(self.training_type_plugin.parallel_devices)

    @property
    def device_ids(self) -> list[int]:
        return list(self._accelerator_connector.plan.devices.value)

    # -- the loop keywords, as resolved --------------------------------------------------------

    max_steps = _Forward[int]("_config.max_steps")
    min_steps = _Forward[int | None]("_config.min_steps")
    max_time = _Forward[timedelta | None]("_config.max_time")
    overfit_batches = _Forward[int | float]("_config.overfit_batches")
    val_check_interval = _Forward[int | float]("_config.val_check_interval")
    check_val_every_n_epoch = _Forward[int | None]("_config.check_val_every_n_epoch")
    log_every_n_steps = _Forward[int]("_config.log_every_n_steps")
    enable_checkpointing = _Forward[bool]("_config.enable_checkpointing")
    enable_progress_bar = _Forward[bool]("_config.enable_progress_bar")
    enable_model_summary = _Forward[bool]("_config.enable_model_summary")
    gradient_clip_val = _Forward[float | None]("_config.gradient_clip_val")
    gradient_clip_algorithm = _Forward[str | None]("_config.gradient_clip_algorithm")
    deterministic = _Forward[bool | str]("_config.deterministic")
    benchmark = _Forward[bool | None]("_config.benchmark")
    inference_mode = _Forward[bool]("_config.inference_mode")
    use_distributed_sampler = _Forward[bool]("_config.use_distributed_sampler")
    detect_anomaly = _Forward[bool]("_config.detect_anomaly")
    barebones = _Forward[bool]("_config.barebones")
    enable_autolog_hparams = _Forward[bool]("_config.enable_autolog_hparams")
    reload_dataloaders_every_n_epochs = _Forward[int]("_config.reload_dataloaders_every_n_epochs")
    default_root_dir = _Forward[str]("_config.default_root_dir")

    @property
    def max_epochs(self) -> int | None:
        """None until a fit ran unless given (Lightning's), then the fit's limit (1000, or -1
        where ``max_steps`` or a Timer ends the fit)."""
        if self._config.max_epochs_given is None and not self._state.fitted:
            return None
        return self._config.max_epochs

    @property
    def min_epochs(self) -> int | None:
        """None until a fit ran unless given (Lightning's), then the fit's minimum (0)."""
        if self._config.min_epochs_given is None and not self._state.fitted:
            return None
        return self._config.min_epochs

    @property
    def num_sanity_val_steps(self) -> int | float:
        """Lightning's: ``inf`` for -1 (the whole loader)."""
        steps = self._config.num_sanity_val_steps
        return math.inf if steps == -1 else steps

    limit_train_batches = _limit("train")
    limit_val_batches = _limit("val")
    limit_test_batches = _limit("test")
    limit_predict_batches = _limit("predict")

    @property
    def estimated_stepping_batches(self) -> int | float:
        """The optimizer steps ``fit`` will take (Lightning's estimate: batches per epoch over
        ``accumulate_grad_batches``, times ``max_epochs``, at most ``max_steps``), e.g. for a
        ``OneCycleLR`` in ``configure_optimizers``; it makes the training loader if the fit has
        not yet."""
        config = self._config
        if config.max_epochs == -1:
            return math.inf if config.max_steps == -1 else config.max_steps
        estimate = self._state.training_batches
        if estimate is None and not self._state.fitted:
            raise MisconfigurationError(
                "trainer.estimated_stepping_batches before any fit: ddpkit counts the training "
                "batches of a fit. Fix: read it in configure_optimizers (or another hook of fit)."
            )
        total = estimate() if estimate is not None else self._state.num_training_batches
        if total == math.inf:
            return config.max_steps
        steps = math.ceil(total / config.accumulation(0)) * max(config.max_epochs, 1)
        return min(steps, config.max_steps) if config.max_steps != -1 else steps

    @property
    def accumulate_grad_batches(self) -> int:
        return self._config.accumulation(self._state.current_epoch)

    @property
    def fast_dev_run(self) -> int | bool:
        n = self._config.fast_dev_run
        return True if n == 1 else n

    # -- what the loop owns --------------------------------------------------------------------

    state = _Forward[TrainerState]("_state.status")
    current_epoch = _Forward[int]("_state.current_epoch")
    global_step = _Forward[int]("_state.global_step")
    is_last_batch = _Forward[bool]("_state.is_last_batch")
    val_check_batch = _Forward[int | float | None](
        "_state.val_check_batch",
        """Validate every this many training batches: set when ``fit`` knows the epoch's length
        (None before, as in Lightning).""",
    )
    lightning_module = _Forward[nn.Module | None](
        "_state.model", "The module of the latest stage (Lightning's name)."
    )
    model = lightning_module
    datamodule = _Forward[Any]("_state.datamodule")
    ckpt_path = _Forward[str | None]("_state.ckpt_path", "The checkpoint the latest stage loaded.")
    optimizers = _Forward[list[torch.optim.Optimizer]]("_state.optimizers")
    lr_scheduler_configs = _Forward[list[SchedulerConfig]]("_state.lr_scheduler_configs")
    num_training_batches = _Forward[int | float]("_state.num_training_batches")

    @property
    def num_val_batches(self) -> list[int | float]:
        """Lightning's: ``validate``'s count while it runs, else the fit's validation loop's."""
        state = self._state
        return list(
            state.validate_batches if state.status.fn == "validate" else state.num_val_batches
        )

    @property
    def num_sanity_val_batches(self) -> list[int | float]:
        """Lightning's: the fit's validation count, each capped at ``num_sanity_val_steps``."""
        return [min(self.num_sanity_val_steps, n) for n in self._state.num_val_batches]

    @property
    def num_test_batches(self) -> list[int | float]:
        """Lightning's: capped at ``num_sanity_val_steps`` while the sanity check runs (every
        evaluation loop's count is)."""
        counts = self._state.num_test_batches
        if not self.sanity_checking:
            return list(counts)
        return [min(self.num_sanity_val_steps, n) for n in counts]

    num_predict_batches = _Forward[list[int | float]]("_state.num_predict_batches")
    metric_store = _Forward[MetricStore]("_state.metrics", "Where ``Module.log`` records values.")
    callback_metrics = _Forward[dict[str, torch.Tensor]]("_state.metrics.callback_metrics")
    logged_metrics = _Forward[dict[str, torch.Tensor]]("_state.metrics.logged_metrics")
    progress_bar_metrics = _Forward[dict[str, float]]("_state.metrics.progress_bar_metrics")
    callbacks = _Forward[list[Any]]("_state.callbacks")
    loggers = _Forward[list[Any]]("_state.loggers")

    @property
    def should_stop(self) -> bool:
        return self._state.should_stop

    @should_stop.setter
    def should_stop(self, value: bool) -> None:
        self._state.should_stop = bool(value)

    sanity_checking = _stage_is("sanity_check")
    training = _stage_is("train")
    validating = _stage_is("validate")
    testing = _stage_is("test")
    predicting = _stage_is("predict")
    interrupted = _Forward[bool](lambda trainer: trainer._state.status.status == "interrupted")

    @property
    def lr_schedulers(self) -> list[Any]:
        """The schedulers themselves (1.x's name; 2.x has ``lr_scheduler_configs``)."""
        return [config.scheduler for config in self._state.lr_scheduler_configs]

    checkpoint_callbacks = _Forward[list[Any]](lambda trainer: _named(trainer, "ModelCheckpoint"))
    checkpoint_callback = _Forward[Any](
        lambda trainer: next(iter(_named(trainer, "ModelCheckpoint")), None),
        "The first ``ModelCheckpoint`` (None without one).",
    )
    early_stopping_callbacks = _Forward[list[Any]](lambda trainer: _named(trainer, "EarlyStopping"))
    early_stopping_callback = _Forward[Any](
        lambda trainer: next(iter(_named(trainer, "EarlyStopping")), None)
    )

    @property
    def checkpoint_path(self) -> str | None:
        """ddpkit's shorthand: the latest file the first ``ModelCheckpoint`` wrote (its
        ``last_model_path`` with ``save_last``, else its ``best_model_path``), or None."""
        callback = self.checkpoint_callback
        if callback is None:
            return None
        return callback.last_model_path or callback.best_model_path or None

    @property
    def logger(self) -> Any:
        """The first logger (None without one)."""
        return self._state.loggers[0] if self._state.loggers else None

    @property
    def log_dir(self) -> str:
        """The first logger's ``log_dir`` (``save_dir`` when it has none), else
        ``default_root_dir``."""
        logger = self.logger
        if logger is None:
            return self._config.default_root_dir
        return str(
            getattr(logger, "log_dir", None) or logger.save_dir or self._config.default_root_dir
        )


def _named(trainer: TrainerProperties, name: str) -> list[Any]:
    """The trainer's callbacks of a class called ``name`` (or a subclass of one)."""
    return [
        cb
        for cb in trainer._state.callbacks
        if any(cls.__name__ == name for cls in type(cb).__mro__)
    ]
