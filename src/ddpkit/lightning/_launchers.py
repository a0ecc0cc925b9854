"""Lightning launchers that hand the start of the ranks to ddpkit's own launchers.

Lightning's strategy calls ``launcher.launch(function, *args, trainer=...)`` for each stage; these
run the stage through ddpkit's launcher (``ddpkit._runtime.launch``: ``launch(fn, stage, *args)``,
the stage's name first), which starts, supervises and ends the ranks:

- :class:`SupervisedSubprocessLauncher` (``DDPPlugin``): the other ranks re-run the script, as
  Lightning's ``popen`` does; ddpkit's supervisor ends every rank when one fails, names the root
  cause and its traceback, and keeps the children for the next stage of the script;
- :class:`SupervisedSpawnLauncher` (``DDPSpawnPlugin``): every rank is spawned; rank zero's results
  come back the way Lightning's own spawn launcher brings them (weights, best checkpoint path,
  trainer state, ``callback_metrics``), through ddpkit's private result file;
- :class:`RankLauncher`: in a rank the subprocess launcher (or torchrun, srun) started, whose plan
  launches nothing: the rank's side of ddpkit's launcher protocol around the stage.
"""

from __future__ import annotations

import os
from typing import Any

import pytorch_lightning as pl
from lightning_utilities.core.apply_func import apply_to_collection
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.trainer.states import TrainerFn, TrainerStatus
from torch import Tensor

from ddpkit._runtime.launch import Launcher
from ddpkit._runtime.ranks._protocol import rank_stage, skip_stage
from ddpkit._runtime.restart.in_process import InProcessAttempts
from ddpkit.lightning._lightning_private import (
    _call_callbacks_load_state_dict,
    _call_callbacks_state_dict,
    _GlobalStateSnapshot,
    _Launcher,
    _MultiProcessingLauncher,
)
from ddpkit.lightning._restart import LightningFit, strategy_restarts

#: The key of the fit's progress in rank zero's extra results.
_FIT_STATE = "ddpkit_fit_state"


def _stage_name(trainer: pl.Trainer | None) -> str:
    """The name ddpkit's reports use for the stage: "fit", "validate", "test", "predict"."""
    fn = trainer.state.fn if trainer is not None else None
    return str(fn.value) if fn is not None else "run"


def _run_stage(
    stage: str,
    attempts: InProcessAttempts,
    trainer: pl.Trainer | None,
    function: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """One stage on rank 0, this process (``stage`` only names it, for ddpkit's reports); a
    fit that restarts runs here once per attempt (``args[0]``: the module, Lightning's
    ``_fit_impl(model, ...)``)."""
    fitting = trainer is not None and trainer.state.fn == TrainerFn.FITTING
    fit = LightningFit(trainer, args[0]) if fitting and trainer is not None else None
    return attempts.run(fit, lambda: function(*args, **kwargs))


def _restarts(trainer: pl.Trainer | None) -> int:
    """A fit restarts as often as its strategy says; the other stages do not."""
    if trainer is None or trainer.state.fn != TrainerFn.FITTING:
        return 0
    return strategy_restarts(trainer.strategy)


class SupervisedSubprocessLauncher(_Launcher):
    """Lightning's launcher interface over ddpkit's subprocess launcher."""

    def __init__(self, launcher: Launcher) -> None:
        self.ddpkit = launcher

    @property
    def is_interactive_compatible(self) -> bool:
        return False  # the other ranks re-run the script: there must be one

    def launch(
        self, function: Any, *args: Any, trainer: pl.Trainer | None = None, **kwargs: Any
    ) -> Any:
        return self.ddpkit.launch(
            _run_stage,
            _stage_name(trainer),
            InProcessAttempts(),
            trainer,
            function,
            args,
            kwargs,
            max_restarts=_restarts(trainer),
        )

    def kill(self, signum: Any) -> None:
        """Lightning asks on SIGTERM and Ctrl-C; ddpkit's supervisor already ends every rank
        (SIGTERM, then SIGKILL after a grace period) and reports how each ended."""


class RankLauncher(_Launcher):
    """In a rank something else started — a child of ddpkit's subprocess launcher, torchrun,
    srun — nothing is launched: the stage runs here, inside the rank's side of ddpkit's launcher
    protocol (``ddpkit._runtime.ranks._protocol.rank_stage``: the rank ends with its launcher,
    counts its stages, and a stage that raises leaves its traceback for rank 0's supervisor;
    nothing at all outside ddpkit's launchers)."""

    @property
    def is_interactive_compatible(self) -> bool:
        return True

    def launch(
        self, function: Any, *args: Any, trainer: pl.Trainer | None = None, **kwargs: Any
    ) -> Any:
        if skip_stage():
            # A restarted job's child: this stage of the script ended before the failure.
            if trainer is not None:
                trainer.state.status = TrainerStatus.FINISHED
                trainer.training = False
            fn = trainer.state.fn if trainer is not None else None
            return [] if fn in (TrainerFn.VALIDATING, TrainerFn.TESTING) else None
        with rank_stage():
            return function(*args, **kwargs)

    def kill(self, signum: Any) -> None:
        """Nothing to end: this rank started no other."""


def _run_spawned(
    stage: str,
    launcher: SupervisedSpawnLauncher,
    trainer: pl.Trainer | None,
    function: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    global_states: _GlobalStateSnapshot | None,
) -> Any:
    """One stage in one spawned rank, as Lightning's own spawn launcher runs it: the parent's
    global state (RNG, deterministic flags) restored, rank zero's results collected."""
    if global_states is not None:
        global_states.restore()
    results = function(*args, **kwargs)
    if trainer is None:
        return results
    return launcher._collect_rank_zero_results(trainer, results)


class SupervisedSpawnLauncher(_MultiProcessingLauncher):
    """Lightning's spawn launcher, with ddpkit's spawn launcher starting the ranks."""

    def __init__(self, strategy: Any, launcher: Launcher, start_method: str) -> None:
        super().__init__(strategy, start_method=start_method)  # type: ignore[arg-type]
        self.ddpkit = launcher

    @property
    def is_interactive_compatible(self) -> bool:
        # Spawned ranks import the main module: there must be one. Forked ranks need none.
        return bool(self._start_method == "fork")

    def launch(
        self, function: Any, *args: Any, trainer: pl.Trainer | None = None, **kwargs: Any
    ) -> Any:
        states = _GlobalStateSnapshot.capture() if self._start_method == "spawn" else None
        restarts = _restarts(trainer)
        if restarts and trainer is not None:
            for logger in trainer.loggers:
                getattr(logger, "version", None)  # resolved here: every attempt logs to it
        output = self.ddpkit.launch(
            _run_spawned,
            _stage_name(trainer),
            self,
            trainer,
            function,
            args,
            kwargs,
            states,
            max_restarts=restarts,
        )
        if trainer is None or output is None:  # None: rank zero runs on another node
            return output
        weights = output.weights_path
        self._recover_results_in_main_process(output, trainer)
        if weights is not None:  # Lightning leaves the rank's temporary directory behind
            with_parent = os.path.dirname(weights)
            if os.path.isdir(with_parent) and not os.listdir(with_parent):
                os.rmdir(with_parent)
        return output.trainer_results

    def get_extra_results(self, trainer: pl.Trainer) -> dict[str, Any]:
        """Lightning's (the callback metrics) and, after ``fit``, what a checkpoint carries of
        the training's progress: the fit loop's and every callback's state (see
        :meth:`update_main_process_results`)."""
        extra = super().get_extra_results(trainer)
        if trainer.state.fn == TrainerFn.FITTING:
            state = {
                "loop": trainer.fit_loop.state_dict(),
                "callbacks": _call_callbacks_state_dict(trainer),
            }
            extra[_FIT_STATE] = apply_to_collection(state, Tensor, lambda t: t.cpu())
        return extra

    def update_main_process_results(self, trainer: pl.Trainer, extra: dict[str, Any]) -> None:
        """Lightning's, and the fit's progress from rank zero, so that a second ``trainer.fit``
        on this Trainer continues where the first ended — as it does under ``DDPPlugin``, where
        this process is rank zero. Lightning's own spawn launcher refuses a second ``fit`` (its
        issue #18775): the parent's loop counters and callbacks never moved, so the second fit
        would start again from epoch 0 and forget the best checkpoints."""
        super().update_main_process_results(trainer, extra)
        state = extra.get(_FIT_STATE)
        if state is None:
            return
        trainer.fit_loop.load_state_dict(state["loop"])
        # Under DDPPlugin a second fit runs on these loops as they ended, not as resumed ones.
        trainer.fit_loop.restarting = False
        for callback in trainer.callbacks:  # type: ignore[attr-defined]
            kept = state["callbacks"].get(callback.state_key)
            if isinstance(callback, ModelCheckpoint) and kept and callback.dirpath is None:
                # The folder rank zero chose at setup, which that rank's callback keeps.
                callback.dirpath = kept["dirpath"]
        _call_callbacks_load_state_dict(trainer, {"callbacks": state["callbacks"]})

    def kill(self, signum: Any) -> None:
        """See :meth:`SupervisedSubprocessLauncher.kill`: ddpkit's supervisor ends the ranks."""
