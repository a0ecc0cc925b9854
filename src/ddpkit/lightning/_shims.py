"""Lightning 1.x signatures of the hooks Lightning 2.x still calls, called with 1.x's arguments.

``on_train_batch_end(..., dataloader_idx)``, ``backward(loss, optimizer, optimizer_idx)``,
``lr_scheduler_step(scheduler, optimizer_idx, metric)``, a callback's ``on_load_checkpoint(trainer,
pl_module, callback_state)``, 1.9's evaluation batch hooks with ``dataloader_idx`` required ...:
for the length of a stage, a 1.x override of such a hook is stood in for by a :class:`Redirect`,
an instance attribute that takes 2.x's arguments and passes 1.x's (:data:`SHIMS`). A callback's
``on_save_checkpoint`` that returns its state (1.0–1.7) has it stored where 2.x keeps callback
states. Redirects are plain objects of module-level classes
and functions, so a spawned rank unpickles them with the module.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl

from ddpkit.errors import DDPKitDeprecationWarning
from ddpkit.utilities._rank_zero import rank_zero_warn


def _required(fn: Any) -> int:
    """How many positional parameters ``fn`` (a function, ``self`` included) requires."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return -1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in kinds and p.default is p.empty)


def _positional(fn: Any) -> int:
    """How many positional parameters ``fn`` takes at most (-1: any number)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return -1
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return -1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in kinds)


def _param_names(fn: Any) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _optimizer_index(trainer: pl.Trainer, optimizer: Any) -> int:
    raw = getattr(optimizer, "optimizer", optimizer)  # a LightningOptimizer wraps it
    return next((i for i, o in enumerate(trainer.optimizers) if o is raw), 0)


class Stage:
    """What a shim needs to know of the stage: the Trainer and the epoch's kept outputs."""

    def __init__(self, trainer: pl.Trainer) -> None:
        self.trainer = trainer
        #: the user's callbacks of the stage (ddpkit.lightning._hooks sets them)
        self.callbacks: list[Any] = []
        #: the training epoch's step outputs, kept when a 1.x on_train_epoch_end(outputs) asks
        self.train_outputs: list[Any] = []
        self.keep_train_outputs = False
        #: the callbacks whose on_save_checkpoint returned a state (each warned once)
        self.returned_states: list[Any] = []

    def predictions(self) -> list[Any]:
        """1.x's ``results`` of ``on_predict_epoch_end``: a list per predict loader."""
        found = self.trainer.predict_loop.predictions or []
        several = len(self.trainer.num_predict_batches) > 1
        return list(found) if several else [list(found)]


class Redirect:
    """An instance attribute standing in for ``obj.name`` for one stage: a call goes to ``how``
    (a module-level function, so that a spawned rank unpickles it) with the class's own
    ``name`` at hand (:attr:`original`)."""

    def __init__(
        self, obj: Any, name: str, how: Callable[..., Any], stage: Stage, inner: Any = None
    ) -> None:
        self.obj, self.name, self.how, self.stage = obj, name, how, stage
        #: another redirect this one wraps (two 1.x adaptations of one hook), else None
        self.inner = inner

    @property
    def original(self) -> Any:
        if self.inner is not None:
            return self.inner
        return getattr(type(self.obj), self.name).__get__(self.obj)

    @property
    def __wrapped__(self) -> Any:
        # Introspection sees the original: Lightning's is_overridden (its code), the step
        # signature Lightning reads for dataloader_idx.
        return self.original

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.how(self, *args, **kwargs)


#: A shim: (the 1.x override's signature fits) → how its redirect calls it.
Shim = tuple[Callable[[Any], bool], Callable[..., Any]]


def _save_returned_state(r: Redirect, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
    """1.0–1.7: a callback's ``on_save_checkpoint`` returned its state; 2.x keeps callback
    states under ``checkpoint["callbacks"][state_key]``. A returned state warns once a stage
    (1.4–1.7's signature is 2.x's: only what it returns is 1.x's)."""
    hook = r.original
    if _positional(hook) == 2:
        state = hook(trainer, pl_module)
    else:
        state = hook(trainer, pl_module, checkpoint)
    if state is None:
        return
    checkpoint.setdefault("callbacks", {})[r.obj.state_key] = state
    if r.obj not in r.stage.returned_states:
        r.stage.returned_states.append(r.obj)
        rank_zero_warn(
            f"{type(r.obj).__name__}.on_save_checkpoint returns the callback's state: Lightning "
            f"1.0–1.7's way to save it (1.8 refused it); ddpkit saves it where Lightning 2.x "
            f"keeps callback states. Lightning 2.x's spelling: state_dict() returns it, "
            f"load_state_dict(state) gets it back.",
            DDPKitDeprecationWarning,
        )


def one_x_signature(owner: str, name: str, fn: Any) -> bool:
    """Whether ``fn``, a hook a shim fits, has a signature 2.x lacks (the shim's warning names
    2.x's): every shim's but a callback's ``on_save_checkpoint``, whose 1.4–1.7 signature is
    2.x's (it may return its state: :func:`_save_returned_state` warns then); 1.0–1.3's took no
    ``checkpoint``."""
    if (owner, name) == ("callback", "on_save_checkpoint"):
        return _positional(fn) == 3
    return True


def _load_own_state(r: Redirect, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
    """1.0–1.7: a callback's ``on_load_checkpoint`` got its own state, not the checkpoint."""
    state = (checkpoint.get("callbacks") or {}).get(r.obj.state_key)
    if state is None:
        return  # 1.x called it only for a callback that had saved a state
    hook = r.original
    if _positional(hook) == 1:
        hook(state)
    else:
        hook(trainer, pl_module, state)


def _drop_last(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    return r.original(*args[:-1], **kwargs)


def _zero(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    return r.original(*args, 0, **kwargs)


def _loader_zero(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    """1.x's ``dataloader_idx``, which 2.x passes only with several loaders: 0 with one."""
    hook = r.original
    if "dataloader_idx" not in kwargs and len(args) < _required(hook):
        args = (*args, 0)
    return hook(*args, **kwargs)


def _train_outputs(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    return r.original(*args, r.stage.train_outputs, **kwargs)


def _results(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    return r.original(*args, r.stage.predictions(), **kwargs)


def _optimizer_idx(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    return r.original(*args, _optimizer_index(r.stage.trainer, args[-1]), **kwargs)


def _backward(r: Redirect, loss: Any, *args: Any, **kwargs: Any) -> Any:
    index = getattr(r.stage.trainer.lightning_module, "_ddpkit_optimizer_idx", 0)
    optimizers = r.stage.trainer.optimizers
    return r.original(loss, optimizers[index] if optimizers else None, index, *args, **kwargs)


def _scheduler_idx(r: Redirect, scheduler: Any, metric: Any = None) -> Any:
    owner = getattr(scheduler, "optimizer", None)
    return r.original(scheduler, _optimizer_index(r.stage.trainer, owner), metric)


def _fits(required: int, positional: int | None = None) -> Callable[[Any], bool]:
    """The 1.x override requires ``required`` positional parameters (``self`` included), or
    takes at most ``positional``."""

    def check(fn: Any) -> bool:
        if positional is not None:
            return _positional(fn) == positional
        return _required(fn) == required

    return check


_EVAL = ("validation", "test", "predict")
#: (owner, hook) → its shim (see the module). Owners: "module", "datamodule", "callback".
SHIMS: dict[tuple[str, str], Shim] = {
    ("module", "on_train_batch_start"): (_fits(4), _zero),
    ("module", "on_train_batch_end"): (_fits(5), _zero),
    ("module", "on_train_epoch_end"): (_fits(2), _train_outputs),
    ("module", "on_predict_epoch_end"): (_fits(2), _results),
    ("module", "transfer_batch_to_device"): (_fits(0, positional=3), _drop_last),
    ("module", "backward"): (_fits(4), _backward),
    ("module", "lr_scheduler_step"): (_fits(4), _scheduler_idx),
    ("module", "on_before_optimizer_step"): (_fits(3), _optimizer_idx),
    ("datamodule", "transfer_batch_to_device"): (_fits(0, positional=3), _drop_last),
    **{("module", f"on_{loop}_batch_start"): (_fits(4), _loader_zero) for loop in _EVAL},
    **{("module", f"on_{loop}_batch_end"): (_fits(5), _loader_zero) for loop in _EVAL},
    ("callback", "on_train_batch_start"): (_fits(6), _zero),
    ("callback", "on_train_batch_end"): (_fits(7), _zero),
    ("callback", "on_train_epoch_end"): (_fits(4), _train_outputs),
    ("callback", "on_predict_epoch_end"): (_fits(4), _results),
    ("callback", "on_before_optimizer_step"): (_fits(5), _optimizer_idx),
    **{("callback", f"on_{loop}_batch_start"): (_fits(6), _loader_zero) for loop in _EVAL},
    **{("callback", f"on_{loop}_batch_end"): (_fits(7), _loader_zero) for loop in _EVAL},
    ("callback", "on_save_checkpoint"): (lambda fn: True, _save_returned_state),
    ("callback", "on_load_checkpoint"): (
        lambda fn: _positional(fn) == 2 or "callback_state" in _param_names(fn),
        _load_own_state,
    ),
}


def defined(obj: Any, name: str, base: type) -> Any:
    """``obj``'s own ``name``: an instance attribute (not a redirect of ddpkit's), or its class's
    when the class defines it itself (not ``base``, Lightning or ddpkit)."""
    own = vars(obj).get(name) if hasattr(obj, "__dict__") else None
    if callable(own) and not isinstance(own, Redirect):
        return own
    fn = getattr(type(obj), name, None)
    if fn is None or getattr(base, name, None) is fn:
        return None
    owner = next((c for c in type(obj).__mro__ if name in vars(c)), None)
    if owner is not None and owner.__module__.startswith(("ddpkit.", "pytorch_lightning.")):
        return None
    return fn if callable(fn) else None
