"""Lightning 1.x hooks on Lightning 2.x's loop, called where and as 1.x called them.

Two kinds, carried for the length of one stage by :func:`ddpkit.lightning._hooks.one_x_hooks`:

- **a hook 2.x still calls, with another signature**: :mod:`ddpkit.lightning._shims`;
- **a hook 2.x never calls** (``on_epoch_start``, ``on_batch_end``, ``on_pretrain_routine_*``,
  ``on_keyboard_interrupt``, ``training_step_end`` ...): called from :class:`OneXHooks`, two
  callbacks placed first and last, so that each runs just before or after the 2.x hook 1.x
  ran it beside (``on_epoch_start`` before ``on_train_epoch_start``, ``on_epoch_end`` after
  every ``on_*_epoch_end``). ``*_step_end`` post-processes its step's output, and a 1.0–1.2
  step or epoch-end output's ``"log"`` / ``"progress_bar"`` dicts are logged, as 1.x logged them.

:data:`ADAPTED` names each hook carried so; the 1.x surface table marks them *provided*.
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl

from ddpkit.lightning._shims import SHIMS, Stage, defined

#: (owner, hook) → what ddpkit does with a 1.x override of it.
ADAPTED: dict[str, str] = {f"{owner}.{hook}": "with 1.x's arguments" for owner, hook in SHIMS}


# -- hooks 2.x never calls -----------------------------------------------------------------------

#: Module hooks 2.x never calls: where 1.x called them.
_MODULE_REMOVED = {
    "on_epoch_start": "before each on_train/validation/test_epoch_start",
    "on_epoch_end": "after each on_train/validation/test_epoch_end, the module's included",
    "on_pretrain_routine_start": "after on_fit_start, before the sanity check",
    "on_pretrain_routine_end": "after on_pretrain_routine_start",
    "on_post_move_to_device": "once the model is on its device, at the start of each stage",
    "training_step_end": "on training_step's output, which it replaces",
    "validation_step_end": "on validation_step's output, which it replaces",
    "test_step_end": "on test_step's output, which it replaces",
    "on_train_dataloader": "before train_dataloader()",
    "on_val_dataloader": "before val_dataloader()",
    "on_test_dataloader": "before test_dataloader()",
    "on_predict_dataloader": "before predict_dataloader()",
    "get_progress_bar_dict": "the progress bar shows what it returns",
}
#: Callback hooks 2.x never calls: where 1.x called them.
_CALLBACK_REMOVED = {
    "on_init_start": "when the Trainer is built, before on_init_end",
    "on_init_end": "when the Trainer is built",
    "on_epoch_start": "before each on_train/validation/test_epoch_start",
    "on_epoch_end": "after each on_train/validation/test_epoch_end, the module's included",
    "on_batch_start": "before on_train_batch_start",
    "on_batch_end": "after on_train_batch_end",
    "on_pretrain_routine_start": "after on_fit_start, before the sanity check",
    "on_pretrain_routine_end": "after on_pretrain_routine_start",
    "on_keyboard_interrupt": "when a stage is interrupted (Ctrl-C), from on_exception",
    "on_before_accelerator_backend_setup": "before setup",
    "on_configure_sharded_model": "after setup",
}
#: Data-module hooks 2.x never calls.
_DATAMODULE_REMOVED = {
    "on_save_checkpoint": "with the checkpoint, when one is saved",
    "on_load_checkpoint": "with the checkpoint, when one is loaded",
    **{
        f"on_{s}_dataloader": f"before {s}_dataloader()"
        for s in ("train", "val", "test", "predict")
    },
}
#: owner ("module", "callback", "datamodule") → its hooks 2.x never calls and ddpkit calls, and
#: where (the epoch-end hooks and ``log_grad_norm`` are not here: ddpkit calls them, and warns,
#: where it calls them)
CALLED_REMOVED = {
    "module": _MODULE_REMOVED,
    "callback": _CALLBACK_REMOVED,
    "datamodule": _DATAMODULE_REMOVED,
}
for _kind, _hooks in CALLED_REMOVED.items():
    ADAPTED.update({f"{_kind}.{name}": where for name, where in _hooks.items()})
_EVAL_LOOPS = ("validation", "test")


class OneXHooks(pl.Callback):
    """Calls the 1.x hooks 2.x never calls (see the module): ``first`` is placed before every
    other callback, the other after them all."""

    def __init__(
        self, first: bool, stage: Stage, module: Any, datamodule: Any, callbacks: list[Any]
    ) -> None:
        self.first, self.stage = first, stage
        self.module, self.datamodule = module, datamodule
        self.callbacks = [c for c in callbacks if not isinstance(c, OneXHooks)]

    @property
    def state_key(self) -> str:
        return f"ddpkit-1x-hooks-{'first' if self.first else 'last'}"

    def _call(self, name: str, *args: Any, module_too: bool = True) -> None:
        for callback in self.callbacks:
            if defined(callback, name, pl.Callback) is not None:
                getattr(callback, name)(*args)
        if module_too and defined(self.module, name, pl.LightningModule) is not None:
            getattr(self.module, name)(*args[2:])

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        hook = "on_before_accelerator_backend_setup" if self.first else "on_configure_sharded_model"
        self._call(hook, trainer, pl_module, module_too=False)

    def _stage_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if self.first and defined(self.module, "on_post_move_to_device", pl.LightningModule):
            self.module.on_post_move_to_device()

    def on_fit_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        # the pre-training routine comes after the module's on_fit_start: chained there by
        # ddpkit.lightning._hooks
        self._stage_start(trainer, pl_module)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if trainer.state.fn == "validate":  # a validate stage, not a fit's validation
            self._stage_start(trainer, pl_module)

    def on_test_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._stage_start(trainer, pl_module)

    def on_predict_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._stage_start(trainer, pl_module)

    # on_epoch_end comes after the module's on_*_epoch_end: ddpkit.lightning._hooks chains it
    # there (the module's hook is the last of the non-monitoring ones)

    def _epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if self.first:  # 1.x's loops called it in the sanity check too
            self._call("on_epoch_start", trainer, pl_module)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.stage.train_outputs = []
        self._epoch_start(trainer, pl_module)

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._epoch_start(trainer, pl_module)

    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._epoch_start(trainer, pl_module)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, *_: Any) -> None:
        if self.first:
            self._call("on_batch_start", trainer, pl_module, module_too=False)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: Any, outputs: Any, *_: Any
    ) -> None:
        empty = outputs is None or (isinstance(outputs, dict | list) and not outputs)
        if self.first and self.stage.keep_train_outputs and not empty:
            self.stage.train_outputs.append(outputs)  # 1.x kept no output of a None step
        if not self.first:
            self._call("on_batch_end", trainer, pl_module, module_too=False)

    def on_exception(self, trainer: pl.Trainer, pl_module: Any, exception: BaseException) -> None:
        if self.first and isinstance(exception, KeyboardInterrupt):
            self._call("on_keyboard_interrupt", trainer, pl_module, module_too=False)

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        hook = defined(self.datamodule, "on_save_checkpoint", pl.LightningDataModule)
        if self.first and hook is not None:
            self.datamodule.on_save_checkpoint(checkpoint)

    def on_load_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        hook = defined(self.datamodule, "on_load_checkpoint", pl.LightningDataModule)
        if self.first and hook is not None:
            self.datamodule.on_load_checkpoint(checkpoint)


def init_hooks(trainer: pl.Trainer, callbacks: list[Any]) -> None:
    """1.x's ``on_init_start`` / ``on_init_end`` of the callbacks given to a Trainer."""
    for name in ("on_init_start", "on_init_end"):
        for callback in callbacks:
            if defined(callback, name, pl.Callback) is not None:
                getattr(callback, name)(trainer)


# -- step outputs ---------------------------------------------------------------------------------


def log_1x_dicts(module: Any, output: Any, *, epoch_end: bool = False) -> Any:
    """1.0–1.2: a step's (or epoch end's) ``{"log": {...}, "progress_bar": {...}}`` items are
    logged (to the loggers / the bar), and an epoch end's other scalars reach
    ``callback_metrics``, as 1.x did; returns ``output``."""
    if not isinstance(output, dict) or not isinstance(module, pl.LightningModule):
        return output
    found_log, found_bar = output.get("log"), output.get("progress_bar")
    logged: dict[str, Any] = found_log if isinstance(found_log, dict) else {}
    shown: dict[str, Any] = found_bar if isinstance(found_bar, dict) else {}
    on_step = not epoch_end
    for key in {**logged, **shown}:
        value = logged[key] if key in logged else shown[key]
        module.log(key, value, logger=key in logged, prog_bar=key in shown, on_step=on_step,
                   on_epoch=epoch_end)  # fmt: skip
    if epoch_end:
        for key, value in output.items():
            if key not in ("log", "progress_bar") and key not in logged and _scalar(value):
                module.log(key, value, logger=False, on_step=False, on_epoch=True)
    return output


def _scalar(value: Any) -> bool:
    import torch

    return isinstance(value, int | float) or (
        isinstance(value, torch.Tensor) and value.numel() == 1
    )


def step_output(module: Any, stage: str, output: Any) -> Any:
    """A 1.x step's output as 1.x used it: through ``<stage>_step_end`` when the module defines
    one, with its 1.0–1.2 ``"log"`` / ``"progress_bar"`` dicts logged."""
    end = defined(module, f"{stage}_step_end", pl.LightningModule)
    if end is not None:
        output = end(module, output)
    return log_1x_dicts(module, output)


# Carried elsewhere: the epoch ends (ddpkit.lightning._epoch_end), 1.x's optimizer hooks
# (ddpkit._compat_1x.optimizer_hooks, ddpkit.lightning._multi_optimizer), 1.x's grad-norm hook
# (ddpkit.lightning._callbacks).
ADAPTED.update(
    {
        "module.training_epoch_end": "at each training epoch's end, with the step outputs",
        "module.validation_epoch_end": "at each validation's end, with the step outputs",
        "module.test_epoch_end": "at the test's end, with the step outputs",
        "module.optimizer_step": "with 1.x's arguments (optimizer_idx, and by keyword on_tpu, "
        "using_native_amp, using_lbfgs)",
        "module.optimizer_zero_grad": "with 1.x's arguments (optimizer_idx)",
        "module.configure_gradient_clipping": "with 1.x's arguments (optimizer_idx)",
        "module.log_grad_norm": "with the gradient norms, under Trainer(track_grad_norm=p)",
    }
)
