"""Where ``self.log`` may be called, and with which ``on_step`` / ``on_epoch``: Lightning's
table (``_FxValidator``), so that a value Lightning refuses is refused here too, instead of
going nowhere.

The loop tells the metric store which hook runs (``MetricStore.fx``); a hook it does not name
(a user's helper called from anywhere, a hook ddpkit does not track) logs by the stage's rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpkit.errors import MisconfigurationError


@dataclass(frozen=True)
class LogOptions:
    """What a hook may log: the allowed values and the defaults of ``on_step`` / ``on_epoch``."""

    allowed_on_step: tuple[bool, ...]
    allowed_on_epoch: tuple[bool, ...]
    default_on_step: bool
    default_on_epoch: bool

    def resolve(self, fx: str, on_step: bool | None, on_epoch: bool | None) -> tuple[bool, bool]:
        """The hook's defaults filled in, then Lightning's check of what it allows."""
        step = self.default_on_step if on_step is None else on_step
        epoch = self.default_on_epoch if on_epoch is None else on_epoch
        for keyword, value, allowed in (
            ("on_step", step, self.allowed_on_step),
            ("on_epoch", epoch, self.allowed_on_epoch),
        ):
            if value not in allowed:
                raise MisconfigurationError(
                    f"You can't `self.log({keyword}={value})` inside `{fx}`, must be one of "
                    f"{allowed} (Lightning's rule). Fix: leave {keyword} out."
                )
        return step, epoch


#: a training batch: training_step and every hook of its optimization
_TRAIN_BATCH = LogOptions((False, True), (False, True), True, False)
#: an evaluation batch: validation_step / test_step and the batch hooks
_EVAL_BATCH = LogOptions((False, True), (False, True), False, True)
#: a hook that runs once a stage or an epoch: its value is the epoch's
_EPOCH = LogOptions((False,), (True,), False, True)

_OPTIONS: dict[str, LogOptions | None] = {
    **dict.fromkeys(
        (
            "training_step",
            "on_train_batch_start",
            "on_train_batch_end",
            "on_before_backward",
            "backward",
            "on_after_backward",
            "on_before_optimizer_step",
            "optimizer_step",
            "configure_gradient_clipping",
            "clip_gradients",
            "on_before_zero_grad",
            "optimizer_zero_grad",
        ),
        _TRAIN_BATCH,
    ),
    **dict.fromkeys(
        (
            "validation_step",
            "test_step",
            "on_validation_batch_start",
            "on_validation_batch_end",
            "on_test_batch_start",
            "on_test_batch_end",
        ),
        _EVAL_BATCH,
    ),
    **dict.fromkeys(
        (
            "on_train_start",
            "on_validation_start",
            "on_test_start",
            "on_train_epoch_start",
            "on_train_epoch_end",
            "on_validation_epoch_start",
            "on_validation_epoch_end",
            "on_test_epoch_start",
            "on_test_epoch_end",
            # 1.x's epoch ends, which ddpkit still calls (with a deprecation)
            "training_epoch_end",
            "validation_epoch_end",
            "test_epoch_end",
        ),
        _EPOCH,
    ),
    **dict.fromkeys(
        (
            "setup",
            "teardown",
            "prepare_data",
            "configure_model",
            "configure_optimizers",
            "configure_callbacks",
            "on_fit_start",
            "on_fit_end",
            "on_sanity_check_start",
            "on_sanity_check_end",
            "on_train_end",
            "on_validation_end",
            "on_test_end",
            "on_predict_start",
            "on_predict_end",
            "on_predict_epoch_start",
            "on_predict_epoch_end",
            "on_predict_batch_start",
            "on_predict_batch_end",
            "predict_step",
            "on_exception",
            "on_save_checkpoint",
            "on_load_checkpoint",
            "lr_scheduler_step",
            "on_validation_model_zero_grad",
            "on_validation_model_eval",
            "on_validation_model_train",
            "on_test_model_eval",
            "on_test_model_train",
            "on_predict_model_eval",
        ),
        None,
    ),
}


def options_of(fx: str) -> LogOptions | None:
    """What hook ``fx`` may log (None: the hook is not in the table, the stage's rules apply);
    a ``MisconfigurationError`` for a hook where Lightning refuses ``self.log``."""
    if fx not in _OPTIONS:
        return None
    found = _OPTIONS[fx]
    if found is None:
        raise MisconfigurationError(
            f"You can't `self.log()` inside `{fx}` (Lightning's rule: the value would go "
            f"nowhere). HINT: You can still log directly to the logger by using "
            f"`self.logger.experiment`, or log it in a step or epoch hook."
        )
    return found
