"""``LoopState``: what the loop owns — counters, metrics, callbacks, loggers, the fitted module.

The Trainer creates one, the loop changes it, and the Trainer's public properties read it. Under
the spawn launcher the parent takes rank zero's copy of the parts a user reads afterwards
(:meth:`LoopState.adopt`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ddpkit.trainer._metrics import MetricStore
from ddpkit.trainer._optim import SchedulerConfig
from ddpkit.trainer._progress import ProgressBar

#: the fit loop's counters: what a checkpoint keeps of it, and a second fit goes on from
_FIT_COUNTERS = (
    "current_epoch", "global_step", "epochs_completed", "batches_stepped", "epoch_batches",
    "fit_batches", "scheduler_steps", "epoch_start", "val_batches", "is_last_batch",
)  # fmt: skip
#: the rest of what the parent of spawned ranks takes from rank zero after a stage
_PORTABLE = (
    "fitted", "val_check_batch", "validate_batches", "should_stop", "status",
    "num_training_batches", "num_val_batches", "num_test_batches", "num_predict_batches",
    "ckpt_path",
)  # fmt: skip
_FIRST_STAGE = {"fit": "train", "validate": "validate", "test": "test", "predict": "predict"}
_ZEROS: dict[str, Any] = {"epoch_start": (0, 0, 0), "val_batches": (0, 0), "is_last_batch": False}


@dataclass
class TrainerState:
    """Lightning's ``trainer.state``: the running entry point, the loop stage, the status."""

    fn: str | None = None
    """"fit", "validate", "test", "predict" (None between stages)."""
    stage: str | None = None
    """"train", "sanity_check", "validate", "test" or "predict"."""
    status: str = "initializing"
    """"initializing", "running", "finished" or "interrupted"."""

    @property
    def finished(self) -> bool:
        return self.status == "finished"

    @property
    def stopped(self) -> bool:
        return self.status in ("finished", "interrupted")


@dataclass
class LoopState:
    metrics: MetricStore = field(default_factory=MetricStore)
    callbacks: list[Any] = field(default_factory=list)
    loggers: list[Any] = field(default_factory=list)
    status: TrainerState = field(default_factory=TrainerState)
    current_epoch: int = 0
    global_step: int = 0
    batches_stepped: int = 0
    """Lightning's ``_batches_that_stepped``, the step the loggers' rows carry: during a
    training batch it counts the batches before it (so a row logged after the batch's optimizer
    step, or by a validation it triggers, carries ``global_step - 1``), as the epoch's row
    does."""
    should_stop: bool = False
    model: nn.Module | None = None
    """The module of the latest stage (what validate / test / predict use without a model)."""
    datamodule: Any = None
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    lr_scheduler_configs: list[SchedulerConfig] = field(default_factory=list)
    num_training_batches: int | float = math.inf
    num_val_batches: list[int | float] = field(default_factory=list)
    """The fit's validation loop's batches per loader (Lightning's ``_max_batches``: [] until
    the fit makes its loader; the sanity check's count derives from it)."""
    validate_batches: list[int | float] = field(default_factory=list)
    """``validate``'s batches (``trainer.num_val_batches`` while it runs)."""
    num_test_batches: list[int | float] = field(default_factory=list)
    num_predict_batches: list[int | float] = field(default_factory=list)
    ckpt_path: str | None = None
    """The checkpoint the latest stage loaded."""
    is_last_batch: bool = False
    fitted: bool = False
    """A fit has started (Lightning's fit-time values, ``min_epochs``, are reported then)."""
    val_check_batch: int | float | None = None
    """Validate every this many training batches (``fit`` sets it, Lightning's rule)."""
    epochs_completed: int = 0
    """Training epochs whose batches all ran (what a checkpoint resumes after)."""
    restarting: bool = False
    """The fit resumed from a checkpoint Lightning would call *restarting*: no sanity check."""
    restarted_mid_epoch: bool = False
    """The fit resumed within an epoch: that epoch's ``on_train_epoch_start`` ran before."""
    epochs_ended: bool = False
    """The fit's epochs are over (``on_train_end``): a checkpoint then records no epoch begun."""
    epoch_batches: int = 0
    """Batches of the running training epoch that have trained (a checkpoint written within
    the epoch resumes after them)."""
    fit_batches: int = 0
    """Training batches run in this fit, across epochs (Lightning's batch progress total)."""
    scheduler_steps: int = 0
    """Learning-rate scheduler steps taken in this fit (Lightning's scheduler progress)."""
    epoch_start: tuple[int, int, int] = (0, 0, 0)
    """``global_step``, ``fit_batches`` and ``scheduler_steps`` when the running epoch began."""
    val_batches: tuple[int, int] = (0, 0)
    """The fit's validation batches in the running epoch, and in its latest validation."""
    said: set[str] = field(default_factory=set)
    """The INFO lines Lightning logs once per Trainer, said already."""
    dispatcher: Any = None
    """The running stage's hook dispatcher (``trainer.save_checkpoint`` calls the hooks)."""
    step_rows: int = 0
    """Step rows written to the loggers in this fit (0 at the end: the run logged none)."""
    epoch_rows: int = 0
    """Epoch rows given to the loggers in this fit."""
    progress: ProgressBar = field(default_factory=lambda: ProgressBar(False))
    training_batches: Any = None
    """During ``fit``, before its loop made the training loader: a callable that makes it (the
    loop then takes that one) and returns its number of batches (``estimated_stepping_batches``
    in ``configure_optimizers``)."""
    eval_rows_seen: int = 0
    """The step an evaluation batch's logger row carries (Lightning's
    ``_seen_batches_per_dataloader``): it goes on across a fit's validations, and starts again
    with each stage and each time the loader is made again."""

    def begin(self, fn: str) -> None:
        # Lightning's: the stage's flag (trainer.training, ...) is set before its first hook
        self.status = TrainerState(fn=fn, stage=_FIRST_STAGE.get(fn), status="running")
        self.eval_rows_seen = 0
        self.training_batches = None  # a fit that failed early may have left its counter
        if fn == "fit":  # (is_last_batch is the fit loop's: a fit's counters set it)
            self.fitted = True
            self.step_rows = self.epoch_rows = 0

    def fit_progress(self) -> dict[str, Any]:
        """Where the fits of this Trainer stand, which a second fit goes on from."""
        return {name: getattr(self, name) for name in _FIT_COUNTERS}

    def restore_fit_progress(self, progress: dict[str, Any] | None) -> None:
        """The counters a fit starts from: ``progress`` (a second fit), else zero."""
        for name in _FIT_COUNTERS:
            setattr(self, name, (progress or {}).get(name, _ZEROS.get(name, 0)))

    def end(self, status: str = "finished") -> None:
        self.status = TrainerState(fn=self.status.fn, stage=None, status=status)

    def portable(self) -> dict[str, Any]:
        """What the parent of spawned ranks takes from rank zero after a stage."""
        return {name: getattr(self, name) for name in (*_FIT_COUNTERS, *_PORTABLE)}

    def adopt(self, portable: dict[str, Any], callbacks: list[Any], loggers: list[Any]) -> None:
        """Take rank zero's counters and its callbacks' and loggers' state (best checkpoint
        path, stopped epoch, a logger's version ...) in the parent of spawned ranks."""
        for name, value in portable.items():
            setattr(self, name, value)
        kept = zip(self.callbacks, callbacks, strict=False)
        for mine, theirs in itertools.chain(kept, zip(self.loggers, loggers, strict=False)):
            if type(mine) is type(theirs):
                vars(mine).update(vars(theirs))

    def __getstate__(self) -> dict[str, Any]:
        # The module and its optimizers travel as arguments of their own; a bar stays local.
        return {
            **self.__dict__,
            "model": None,
            "optimizers": [],
            "lr_scheduler_configs": [],
            "progress": ProgressBar(False),
            "dispatcher": None,
        }


@dataclass
class StageOutput:
    """What a stage leaves behind on rank zero; the spawn launcher carries it to the parent."""

    result: Any = None
    callback_metrics: dict[str, torch.Tensor] = field(default_factory=dict)
    logged_metrics: dict[str, torch.Tensor] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    callbacks: list[Any] = field(default_factory=list)
    loggers: list[Any] = field(default_factory=list)
    state_dict: dict[str, torch.Tensor] | None = None
