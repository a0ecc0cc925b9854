"""``ddpkit.lightning.Trainer``: Lightning 2.x's own Trainer, which also takes Lightning 1.x's
spellings."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.loggers import CSVLogger

from ddpkit._runtime.restart.checks import check_max_restarts, check_restarts
from ddpkit.connector import Plan
from ddpkit.errors import DDPKitDeprecationWarning, DDPKitWarning, MisconfigurationError
from ddpkit.lightning import _arguments as arguments
from ddpkit.lightning._adapters import init_hooks
from ddpkit.lightning._batch_outputs import one_x_batch_outputs
from ddpkit.lightning._checkpoints import (
    callbacks_restored_in_fit_only,
    trust,
    trust_trainer,
    weights_only_for,
)
from ddpkit.lightning._epoch_end import epoch_end_hooks
from ddpkit.lightning._hooks import one_optimizer_1x_hooks, one_x_hooks
from ddpkit.lightning._keywords import Rewrite
from ddpkit.lightning._multi_optimizer import is_1x_multi_optimizer, multi_optimizer_stage
from ddpkit.lightning._restart import RestartConnector, RestartState, strategy_restarts
from ddpkit.lightning._signature import trainer_signature
from ddpkit.lightning._supervised import SupervisedDDPStrategy
from ddpkit.lightning._tips import quiet_tips
from ddpkit.lightning._trainer_1x import OneXAttributes
from ddpkit.lightning._translate import lightning_refusals, translate_call
from ddpkit.utilities._rank_zero import rank_zero_warn


def _renamed(call: str, old: str, value: Any, new: str, current: Any) -> Any:
    """A stage's loaders given by their 1.x keyword (renamed in Lightning 1.4): its 2.x one."""
    if value is None:
        return current
    if current is not None:
        raise MisconfigurationError(
            f"trainer.{call}({old}=..., {new}=...): the loaders twice, by their 1.x and their "
            f"Lightning 2.x keyword. Fix: drop {old}=."
        )
    rank_zero_warn(
        f"trainer.{call}({old}=...): renamed in Lightning 1.4; ddpkit passes it as {new}=..., "
        f"its Lightning 2.x name.",
        DDPKitDeprecationWarning,
    )
    return value


def _with_restarts(trainer: pl.Trainer, max_restarts: Any, plan: Plan | None) -> None:
    """``ddpkit.lightning.Trainer(max_restarts=N)``: checked (ranks ddpkit's launchers start on
    this machine, supervised), handed to the strategy; every such Trainer gets the restart
    callback (first) and connector, so that torchrun's restarted workers resume too."""
    count = check_max_restarts("Trainer", max_restarts)
    strategy = trainer.strategy
    if count:
        if plan is None or not isinstance(strategy, SupervisedDDPStrategy):
            raise MisconfigurationError(
                f"Trainer(max_restarts={count}): restarts need ddpkit's launchers, and this "
                f"Trainer runs on Lightning's own ({type(strategy).__name__}). Fix: add "
                f"supervise=True, or pass strategy=ddpkit.lightning.SupervisedDDPStrategy("
                f"max_restarts={count})."
            )
        check_restarts(count, plan)
        strategy.max_restarts = count
    kept = bool(strategy_restarts(strategy)) and trainer.checkpoint_callback is None
    callbacks: list[Any] = trainer.callbacks  # type: ignore[attr-defined]
    callbacks.insert(0, RestartState(kept=kept))
    trainer._checkpoint_connector = RestartConnector(trainer)


@contextlib.contextmanager
def _trusting(trainer: pl.Trainer) -> Iterator[None]:
    """After a stage, the checkpoints its ModelCheckpoint callbacks wrote load back whole."""
    try:
        yield
    finally:
        trust_trainer(trainer)


class Trainer(OneXAttributes, arguments.ArgparseAPI, pl.Trainer):
    """A ``pytorch_lightning.Trainer`` (a subclass: everything it does is Lightning's) that also
    runs Lightning 1.x calls.

    It takes every keyword the installed Lightning takes, plus:

    - 1.x device flags — ``accelerator="ddp_cpu" | "ddp" | "ddp_spawn" | "ddp_cpu_spawn"``,
      ``gpus``, ``num_processes``, ``plugins=[DDPPlugin(...) | DDPSpawnPlugin(...) | a
      training-type name | a cluster environment]``. ddpkit's connector resolves them (the same
      plan as ``ddpkit explain``, in :attr:`plan`) into Lightning's own accelerator, devices,
      ``DDPStrategy`` (``start_method="popen"`` for ``DDPPlugin``, ``"spawn"`` for
      ``DDPSpawnPlugin``, with the plugin's DDP options), cluster environment and precision;
    - 1.x's other keywords (``resume_from_checkpoint``, ``progress_bar_refresh_rate``,
      ``weights_summary``, ``checkpoint_callback``, ...), each mapped onto its 2.x spelling or
      refused with the replacement named (docs/lightning.md has the table).

    Each 1.x spelling warns once, on rank zero (``DDPKitDeprecationWarning``), with the Lightning
    2.x spelling that means the same; :attr:`lightning_call` holds the device part. A call in
    Lightning 2.x's own spelling is passed to Lightning unchanged.
    """

    def __init__(self, **kwargs: Any) -> None:
        quiet_tips()
        max_restarts = kwargs.pop("max_restarts", 0)  # ddpkit's own: docs/reliability.md
        translation = translate_call(kwargs)
        for message in translation.deprecations:
            rank_zero_warn(message, DDPKitDeprecationWarning)
        for note in translation.notes:
            rank_zero_warn(note, DDPKitWarning)
        with lightning_refusals(kwargs):  # a bare Python error of Lightning's: the call quoted
            super().__init__(**translation.kwargs)
        #: the connector's plan for a call with 1.x device flags (None: Lightning resolved it)
        self.plan: Plan | None = translation.plan
        #: the Lightning 2.x device call that means the same as the 1.x one (None: no 1.x flags)
        self.lightning_call: str | None = (
            translation.devices.call if translation.devices is not None else None
        )
        self._rewrite: Rewrite = translation.rewrite
        self._given_1x = dict(translation.rewrite.given)
        _with_restarts(self, max_restarts, translation.plan)
        init_hooks(self, self.callbacks)  # 1.x's on_init_start / on_init_end
        flush = translation.rewrite.flush_logs_every_n_steps
        if flush is not None:
            for logger in self.loggers:
                if isinstance(logger, CSVLogger):
                    # What CSVLogger(flush_logs_every_n_steps=...) sets at construction.
                    logger._flush_logs_every_n_steps = flush

    # -- Lightning 1.x's argparse API (removed in 2.0): its base, ddpkit.lightning._arguments

    @classmethod
    def default_attributes(cls) -> dict[str, Any]:
        """Lightning 1.x's: each keyword's default."""
        return {k: p.default for k, p in inspect.signature(cls).parameters.items()}

    @classmethod
    def get_deprecated_arg_names(cls) -> list[str]:
        """Lightning 1.x's: names ``add_argparse_args`` leaves out (none)."""
        return []

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A spawned rank unpickles its Trainer: Lightning's tips stay quiet there too.
        quiet_tips()
        self.__dict__.update(state)

    def explain(self) -> str:
        """The connector's plan, as ``ddpkit explain`` prints it, then the Lightning call."""
        if self.plan is None:
            return "Lightning 2.x's own device flags: Lightning resolved them (no ddpkit plan)."
        return f"{self.plan.explain()}\n  lightning call   {self.lightning_call}"

    # -- the stages: Lightning 2.x's signatures (LightningCLI's subcommands read them), then the
    # 1.x keywords ddpkit takes there

    def fit(
        self,
        model: pl.LightningModule,
        train_dataloaders: Any = None,
        val_dataloaders: Any = None,
        datamodule: pl.LightningDataModule | None = None,
        ckpt_path: str | Path | None = None,
        weights_only: bool | None = None,
        *,
        train_dataloader: Any = None,
    ) -> None:
        """Lightning's ``fit``; 1.x's ``train_dataloader=`` is its ``train_dataloaders``, and
        ``Trainer(resume_from_checkpoint=...)`` its ``ckpt_path`` when none is given."""
        loaders = _renamed("fit", "train_dataloader", train_dataloader, "train_dataloaders",
                           train_dataloaders)  # fmt: skip
        if ckpt_path is None:
            ckpt_path = self._rewrite.resume_from_checkpoint
        bound = dict(model=model, train_dataloaders=loaders, val_dataloaders=val_dataloaders,
                     datamodule=datamodule, ckpt_path=ckpt_path,
                     weights_only=weights_only)  # fmt: skip
        with self._stage("fit", bound) as keywords:
            super().fit(**keywords)

    def validate(
        self,
        model: pl.LightningModule | None = None,
        dataloaders: Any = None,
        ckpt_path: str | Path | None = None,
        verbose: bool = True,
        datamodule: pl.LightningDataModule | None = None,
        weights_only: bool | None = None,
        *,
        val_dataloaders: Any = None,
    ) -> Any:
        """Lightning's ``validate``; 1.x's ``val_dataloaders=`` is its ``dataloaders``."""
        bound = dict(model=model, dataloaders=dataloaders, ckpt_path=ckpt_path, verbose=verbose,
                     datamodule=datamodule, weights_only=weights_only)  # fmt: skip
        return self._evaluation("validate", "val_dataloaders", val_dataloaders, bound)

    def test(
        self,
        model: pl.LightningModule | None = None,
        dataloaders: Any = None,
        ckpt_path: str | Path | None = None,
        verbose: bool = True,
        datamodule: pl.LightningDataModule | None = None,
        weights_only: bool | None = None,
        *,
        test_dataloaders: Any = None,
    ) -> Any:
        """Lightning's ``test``; 1.x's ``test_dataloaders=`` is its ``dataloaders``."""
        bound = dict(model=model, dataloaders=dataloaders, ckpt_path=ckpt_path, verbose=verbose,
                     datamodule=datamodule, weights_only=weights_only)  # fmt: skip
        return self._evaluation("test", "test_dataloaders", test_dataloaders, bound)

    def _evaluation(self, stage: str, old: str, loaders: Any, bound: dict[str, Any]) -> Any:
        """``validate`` / ``test``: the loaders given by their 1.x keyword ``old`` renamed, then
        Lightning's stage."""
        bound["dataloaders"] = _renamed(stage, old, loaders, "dataloaders", bound["dataloaders"])
        with self._stage(stage, bound) as keywords:
            return getattr(super(), stage)(**keywords)

    def predict(
        self,
        model: pl.LightningModule | None = None,
        dataloaders: Any = None,
        datamodule: pl.LightningDataModule | None = None,
        return_predictions: bool | None = None,
        ckpt_path: str | Path | None = None,
        weights_only: bool | None = None,
    ) -> Any:
        """Lightning's ``predict``."""
        bound = dict(model=model, dataloaders=dataloaders, datamodule=datamodule,
                     return_predictions=return_predictions, ckpt_path=ckpt_path,
                     weights_only=weights_only)  # fmt: skip
        with self._stage("predict", bound) as keywords:
            return super().predict(**keywords)

    def save_checkpoint(self, filepath: Any, *args: Any, **kwargs: Any) -> None:
        """Lightning's; a checkpoint written so loads back whole (``_checkpoints``)."""
        super().save_checkpoint(filepath, *args, **kwargs)
        trust(filepath)

    @contextlib.contextmanager
    def _stage(self, stage: str, bound: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Before any rank starts: the 1.x Trainer keywords that act on the module applied, 1.x
        hooks checked, and for the length of the stage the module's 1.x epoch-end hooks carried,
        its training hooks given 1.x's outputs, and a ``ckpt_path`` restoring as 1.x restored.
        Yields the stage's keywords, with ``weights_only`` for its ``ckpt_path``
        (``_checkpoints``)."""
        quiet_tips()  # again: a warnings context around the constructor may have reset it
        model = bound.get("model") or self.lightning_module
        if self._rewrite.prepare_data_per_node is not None:
            for obj in [model, *bound.values()]:
                if isinstance(obj, pl.LightningModule | pl.LightningDataModule):
                    obj.prepare_data_per_node = self._rewrite.prepare_data_per_node
        callbacks: list[Any] = self.callbacks
        self._manual_optimization(model)
        multi = stage == "fit" and is_1x_multi_optimizer(model)
        # fit(model, dm): 1.x's second argument could be a data module, as 2.x's can
        given = [v for v in bound.values() if isinstance(v, pl.LightningDataModule)]
        datamodule = given[0] if given else self.datamodule
        with (
            _trusting(self),
            callbacks_restored_in_fit_only(self, stage),
            epoch_end_hooks(stage, model, callbacks),
            multi_optimizer_stage(self, model) if multi else one_optimizer_1x_hooks(self, model),
            one_x_batch_outputs(self, model, multi) if stage == "fit" else contextlib.nullcontext(),
            one_x_hooks(self, stage, model, datamodule, callbacks, spawn_1x=self._spawns_1x()),
        ):
            ckpt, weights_only = bound.get("ckpt_path"), bound.get("weights_only")
            yield {**bound, "weights_only": weights_only_for(ckpt, weights_only)}

    def _spawns_1x(self) -> bool:
        """1.x device flags that resolved to spawned ranks (1.x's ``ddp_spawn``; forked in a
        notebook, where the parent's objects stay as they were all the same)."""
        return self.plan is not None and self.plan.launcher.value in ("spawn", "fork")

    def _manual_optimization(self, model: Any) -> None:
        """1.1–1.2's ``Trainer(automatic_optimization=False)``: the module's switch, which 1.x's
        module read from its Trainer (and ``trainer.global_step`` reads it after ``fit``)."""
        if self._rewrite.automatic_optimization is not None and isinstance(
            model, pl.LightningModule
        ):
            model.automatic_optimization = False

    def tune(
        self,
        model: pl.LightningModule,
        train_dataloaders: Any = None,
        val_dataloaders: Any = None,
        dataloaders: Any = None,
        datamodule: Any = None,
        scale_batch_size_kwargs: dict[str, Any] | None = None,
        lr_find_kwargs: dict[str, Any] | None = None,
        method: str = "fit",
    ) -> dict[str, Any]:
        """Lightning 1.x's ``trainer.tune``: the batch-size scaler, then the learning-rate
        finder, as ``auto_scale_batch_size`` / ``auto_lr_find`` asked; returns their results
        (``{"scale_batch_size": ..., "lr_find": ...}``). Lightning 2.x's spelling is
        ``Tuner(trainer).scale_batch_size(model, ...)`` / ``.lr_find(model, ...)``."""
        from pytorch_lightning.tuner.tuning import Tuner

        rank_zero_warn(
            "trainer.tune(model): removed in Lightning 2.0; ddpkit runs its Lightning 2.x "
            "spelling, tuner = Tuner(trainer); tuner.scale_batch_size(model, ...); "
            "tuner.lr_find(model, ...).",
            DDPKitDeprecationWarning,
        )
        data = {
            "train_dataloaders": train_dataloaders,
            "val_dataloaders": val_dataloaders,
            "dataloaders": dataloaders,
            "datamodule": datamodule,
            "method": method,
        }
        tuner, result = Tuner(self), dict[str, Any]()
        self._ddpkit_tuning = True
        try:
            if "scale_batch_size" in self._rewrite.tune:
                options = {"mode": self._rewrite.tune["scale_batch_size"]}
                options.update(scale_batch_size_kwargs or {})
                result["scale_batch_size"] = tuner.scale_batch_size(model, **data, **options)
            if "lr_find" in self._rewrite.tune:
                options = {"attr_name": self._rewrite.tune["lr_find"], "update_attr": True}
                options.update(lr_find_kwargs or {})
                result["lr_find"] = tuner.lr_find(model, **data, **options)
        finally:
            self._ddpkit_tuning = False
        return result


# Tools that read the Trainer's signature (LightningCLI through jsonargparse, the argparse API
# above, the PL_TRAINER_* defaults) see Lightning 2.x's keywords and 1.x's, with their types.
Trainer.__init__.__signature__ = trainer_signature()  # type: ignore[attr-defined]
