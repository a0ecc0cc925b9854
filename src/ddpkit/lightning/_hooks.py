"""A stage's Lightning 1.x hooks — in the module, the data module and the callbacks — carried,
or refused, before any rank starts.

:func:`one_x_hooks` installs for the length of one stage what :mod:`ddpkit.lightning._adapters`
provides: shims for 1.x signatures of hooks 2.x still calls, the two :class:`OneXHooks`
callbacks for the hooks it never calls, ``*_step_end`` and the 1.0–1.2 ``"log"`` dicts around the
step methods, ``on_*_dataloader`` before the loaders, and the module's ``get_progress_bar_dict``
behind the progress bar. Then :func:`check_hooks` looks at what is left: a hook the 1.x surface
table refuses (``tbptt_split_batch``, ``add_to_queue``) is a ``MisconfigurationError`` with its
fix; an out-of-scope one (``on_hpc_save``) a warning saying why it never runs; a hook 2.x would
call with fewer arguments than it requires a ``MisconfigurationError`` naming the parameter —
never a ``TypeError`` deep in the loop, inside every rank.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable, Iterator
from typing import Any

import pytorch_lightning as pl
import torch

from ddpkit._compat_1x.hooks import INSTEAD
from ddpkit._compat_1x.optimizer_hooks import HOOKS, as_2x, takes_optimizer_idx
from ddpkit.errors import DDPKitDeprecationWarning, MisconfigurationError
from ddpkit.lightning import _surface
from ddpkit.lightning._adapters import CALLED_REMOVED, OneXHooks, step_output
from ddpkit.lightning._shims import SHIMS, Redirect, Stage, defined, one_x_signature
from ddpkit.utilities._rank_zero import rank_zero_warn

_OWNERS = (
    ("module", pl.LightningModule, "LightningModule"),
    ("datamodule", pl.LightningDataModule, "LightningDataModule"),
    ("callback", pl.Callback, "Callback"),
)
_STEPS = {"fit": ("training", "validation"), "validate": ("validation",), "test": ("test",)}
_LOADERS = {
    "fit": ("train", "val"),
    "validate": ("val",),
    "test": ("test",),
    "predict": ("predict",),
}


def _required(function: Any) -> list[str]:
    """The positional parameters a bound hook requires (``self`` already bound)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in parameters if p.kind in kinds and p.default is p.empty]


def _check_signatures(obj: Any, base: type) -> None:
    """A hook Lightning 2.x calls, overridden with more required parameters than it passes and
    no shim for that 1.x signature: refused here, not a ``TypeError`` inside the loop."""
    for name, hook in inspect.getmembers(base, inspect.isfunction):
        if not name.startswith("on_") or getattr(type(obj), name, hook) is hook:
            continue
        if isinstance(vars(obj).get(name), Redirect):
            continue  # a 1.x signature ddpkit calls with 1.x's arguments
        theirs = _required(getattr(obj, name))
        ours = _required(hook.__get__(obj))
        if len(theirs) > len(ours):
            extra = ", ".join(theirs[len(ours) :])
            raise MisconfigurationError(
                f"{type(obj).__name__}.{name}({', '.join(theirs)}): Lightning 2.x calls "
                f"{name}({', '.join(ours)}); {extra} is not passed. Fix: drop {extra}, or give "
                f"it a default."
            )


def _check_table(obj: Any, base: type, owner: str) -> None:
    """The hooks of ``obj`` the 1.x surface table refuses (an error) or leaves out of scope (a
    warning: defined, they are never called)."""
    members = _surface.load()["members"]
    for key, entry in members.items():
        cls, _, name = key.partition(".")
        if cls != owner or entry.get("role") != "hook" or "note" not in entry:
            continue
        if entry["status"] not in ("refused", "out of scope") or not defined(obj, name, base):
            continue
        message = f"{type(obj).__name__}.{name}: {entry['note']}"
        if entry["status"] == "refused":
            raise MisconfigurationError(f"{message}.")
        if entry["status"] == "out of scope":
            rank_zero_warn(message, DDPKitDeprecationWarning)


def check_hooks(model: Any, callbacks: Iterable[Any], datamodule: Any = None) -> None:
    """Refuse or warn about the 1.x hooks left after :func:`one_x_hooks` (see the module)."""
    objects: list[tuple[Any, type, str]] = [(model, pl.LightningModule, "LightningModule")]
    objects += [(datamodule, pl.LightningDataModule, "LightningDataModule")]
    objects += [(c, pl.Callback, "Callback") for c in callbacks if not isinstance(c, OneXHooks)]
    for obj, base, owner in objects:
        if isinstance(obj, base):
            _check_signatures(obj, base)
            _check_table(obj, base, owner)
            _warn_removed(obj, owner, base)


class _Installed:
    """Instance attributes set for one stage, removed after it."""

    def __init__(self) -> None:
        self.done: list[tuple[Any, str]] = []

    def set(self, obj: Any, name: str, value: Any) -> None:
        if name in vars(obj):
            return  # the user's own instance attribute, or another stage helper's
        setattr(obj, name, value)
        self.done.append((obj, name))

    def wrap(self, obj: Any, name: str, how: Any, stage: Stage) -> None:
        """A redirect of ``obj.name`` around what it is now (a redirect of this stage, or the
        class's own)."""
        inner = vars(obj).get(name)
        if inner is not None and (obj, name) not in self.done:
            return  # the user's own instance attribute
        setattr(obj, name, Redirect(obj, name, how, stage, inner=inner))
        if inner is None:
            self.done.append((obj, name))

    def undo(self) -> None:
        for obj, name in reversed(self.done):
            vars(obj).pop(name, None)


def _shims(installed: _Installed, stage: Stage, owned: list[tuple[str, Any, type]]) -> None:
    for owner, obj, base in owned:
        for (kind, name), (fits, how) in SHIMS.items():
            hook = defined(obj, name, base) if kind == owner else None
            if hook is not None and fits(hook):
                installed.set(obj, name, Redirect(obj, name, how, stage))
                stage.keep_train_outputs |= name == "on_train_epoch_end"
                if one_x_signature(owner, name, hook):
                    _warn_signature(obj, name, hook, base)


def _params(fn: Any) -> str:
    """``(trainer, pl_module, batch, dataloader_idx=0)``: the parameters with their defaults,
    without ``self`` or annotations."""
    found = inspect.signature(fn).parameters.values()
    shown = [str(p.replace(annotation=p.empty)) for p in found if p.name not in ("self", "cls")]
    return f"({', '.join(shown)})"


def _warn_signature(obj: Any, name: str, hook: Any, base: type) -> None:
    """A 1.x signature ddpkit calls as 1.x did: once, its 2.x signature."""
    ours = getattr(base, name, None)
    spelled = f"{name}{_params(ours)}" if ours is not None else INSTEAD.get(name, name)
    rank_zero_warn(
        f"{type(obj).__name__}.{name}{_params(hook)}: Lightning 1.x's signature; ddpkit calls "
        f"it with 1.x's arguments. Lightning 2.x's: {spelled}.",
        DDPKitDeprecationWarning,
    )


def _warn_removed(obj: Any, owner: str, base: type) -> None:
    """Each hook 2.x never calls that ``obj`` defines and ddpkit calls: once, where 1.x called
    it and its 2.x spelling."""
    members = _surface.load()["members"]
    kind = {"LightningModule": "module", "Callback": "callback"}.get(owner, "datamodule")
    for name, where in CALLED_REMOVED[kind].items():
        if getattr(base, name, None) is not None or defined(obj, name, base) is None:
            continue  # a hook this Lightning still has, or one the object does not define
        until = members.get(f"{owner}.{name}", {}).get("until", "1.9")
        rank_zero_warn(
            f"{type(obj).__name__}.{name}: removed after Lightning {until}; ddpkit calls it "
            f"{where}, as 1.x did. Lightning 2.x's spelling: {INSTEAD[name]}.",
            DDPKitDeprecationWarning,
        )


def _then_epoch_end(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    """The module's ``on_*_epoch_end``, then 1.x's ``on_epoch_end`` of the callbacks and the
    module, as 1.x's loops called it after the epoch's end hooks (the sanity check's too)."""
    result = r.original(*args, **kwargs)
    trainer, module = r.stage.trainer, r.obj
    for callback in r.stage.callbacks:
        if defined(callback, "on_epoch_end", pl.Callback) is not None:
            callback.on_epoch_end(trainer, module)
    if defined(module, "on_epoch_end", pl.LightningModule) is not None:
        module.on_epoch_end()
    return result


def _then_pretraining(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    """The module's ``on_fit_start``, then 1.x's pre-training routine hooks of the callbacks and
    the module (1.x ran it after on_fit_start, before the sanity check)."""
    result = r.original(*args, **kwargs)
    trainer, module = r.stage.trainer, r.obj
    for name in ("on_pretrain_routine_start", "on_pretrain_routine_end"):
        for callback in r.stage.callbacks:
            if defined(callback, name, pl.Callback) is not None:
                getattr(callback, name)(trainer, module)
        if defined(module, name, pl.LightningModule) is not None:
            getattr(module, name)()
    return result


def _pretraining(installed: _Installed, state: Stage, model: Any) -> None:
    objects = [(model, pl.LightningModule)] + [(c, pl.Callback) for c in state.callbacks]
    names = ("on_pretrain_routine_start", "on_pretrain_routine_end")
    if any(defined(obj, name, base) is not None for obj, base in objects for name in names):
        installed.wrap(model, "on_fit_start", _then_pretraining, state)


def _epoch_ends(installed: _Installed, state: Stage, model: Any) -> None:
    objects = [(model, pl.LightningModule)] + [(c, pl.Callback) for c in state.callbacks]
    if any(defined(obj, "on_epoch_end", base) is not None for obj, base in objects):
        for loop in ("train", "validation", "test"):
            installed.wrap(model, f"on_{loop}_epoch_end", _then_epoch_end, state)


def _step(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    return step_output(r.obj, r.name[: -len("_step")], r.original(*args, **kwargs))


def _loader(r: Redirect) -> Any:
    getattr(r.obj, f"on_{r.name}")()  # on_train_dataloader() before train_dataloader()
    return r.original()


def _bar_metrics(r: Redirect, trainer: Any, pl_module: Any) -> Any:
    return pl_module.get_progress_bar_dict()


def _steps(installed: _Installed, state: Stage, stage: str, model: Any) -> None:
    """``*_step_end`` and the 1.0–1.2 ``"log"`` dicts around each step method of the stage."""
    for loop in _STEPS.get(stage, ()):
        name = f"{loop}_step"
        if getattr(model, name, None) is None or name in vars(model):
            continue  # several 1.x optimizers: their stage does it (_multi_optimizer)
        if defined(model, f"{loop}_step_end", pl.LightningModule) is not None:
            installed.set(model, f"{loop}_step_end", None)  # Lightning 2.x never calls it
        installed.set(model, name, Redirect(model, name, _step, state))


def _loaders(installed: _Installed, state: Stage, stage: str, owned: list[Any]) -> None:
    """1.3–1.6's ``on_<x>_dataloader()``, called before ``<x>_dataloader()``."""
    for _, obj, base in owned:
        for loader in _LOADERS[stage]:
            if defined(obj, f"on_{loader}_dataloader", base) is not None:
                name = f"{loader}_dataloader"
                installed.set(obj, name, Redirect(obj, name, _loader, state))


def _count_optimizers(conf: Any) -> int:
    """How many optimizers a ``configure_optimizers`` result holds (1.x's forms)."""
    if isinstance(conf, torch.optim.Optimizer | dict):
        return 1
    if isinstance(conf, list | tuple):
        if len(conf) == 2 and all(isinstance(part, list | tuple) for part in conf):
            return _count_optimizers(conf[0])  # ([optimizers], [schedulers])
        if all(isinstance(c, torch.optim.Optimizer) for c in conf) or all(
            isinstance(c, dict) for c in conf
        ):
            return len(conf)
    return 0  # a form Lightning's own parser refuses with its words


def _several_need_an_index(r: Redirect) -> Any:
    conf = r.original()
    count = _count_optimizers(conf)
    if count > 1:
        raise MisconfigurationError(
            f"{type(r.obj).__name__}.configure_optimizers() returns {count} optimizers, but "
            f"`training_step` is missing the `optimizer_idx` argument, which Lightning 1.x's "
            f"automatic optimization steps each of them with. Fix: training_step(self, batch, "
            f"batch_idx, optimizer_idx), or manual optimization (self.automatic_optimization "
            f"= False and the optimizers from self.optimizers())."
        )
    return conf


def _one_optimizer_without_index(installed: _Installed, state: Stage, model: Any) -> None:
    """1.x refused several optimizers to a ``training_step`` without ``optimizer_idx`` with
    its own words (a ``ValueError``); Lightning 2.x's would send a 1.x user to manual
    optimization."""
    if model.automatic_optimization and "configure_optimizers" not in vars(model):
        redirect = Redirect(model, "configure_optimizers", _several_need_an_index, state)
        installed.set(model, "configure_optimizers", redirect)


def _prepared(r: Redirect) -> None:
    """``prepare_data`` in a spawned rank: the launching process ran it (1.x's ddp_spawn)."""


def _prepare_before_spawn(installed: _Installed, state: Stage, owned: list[Any]) -> None:
    """Lightning 1.0–1.5 ran ``prepare_data`` in the launching process, then spawned the ranks:
    what it set on the module or data module reached every rank, and no rank ran it again."""
    for _, obj, base in owned:
        if defined(obj, "prepare_data", base) is not None:
            obj.prepare_data()
            installed.set(obj, "prepare_data", Redirect(obj, "prepare_data", _prepared, state))


def _progress_bar(installed: _Installed, state: Stage, model: Any) -> None:
    """A 1.x ``get_progress_bar_dict`` override: the bar shows what it returns."""
    bar = state.trainer.progress_bar_callback
    if bar is not None and defined(model, "get_progress_bar_dict", pl.LightningModule):
        installed.set(bar, "get_metrics", Redirect(bar, "get_metrics", _bar_metrics, state))


@contextlib.contextmanager
def one_x_hooks(
    trainer: pl.Trainer,
    stage: str,
    model: Any,
    datamodule: Any,
    callbacks: list[Any],
    spawn_1x: bool = False,
) -> Iterator[Stage]:
    """For one stage: what :mod:`ddpkit.lightning._adapters` provides, installed (see the
    module), then :func:`check_hooks`; undone when the stage ends. ``spawn_1x``: 1.x device
    flags resolved to spawned ranks (``prepare_data`` runs here first, as 1.0–1.5's did)."""
    installed, state = _Installed(), Stage(trainer)
    users = [c for c in callbacks if isinstance(c, pl.Callback)]
    state.callbacks = users
    owned: list[tuple[str, Any, type]] = []
    if isinstance(model, pl.LightningModule):
        owned.append(("module", model, pl.LightningModule))
    if isinstance(datamodule, pl.LightningDataModule):
        owned.append(("datamodule", datamodule, pl.LightningDataModule))
    first = OneXHooks(True, state, model, datamodule, users)
    last = OneXHooks(False, state, model, datamodule, users)
    try:
        _shims(installed, state, [*owned, *(("callback", c, pl.Callback) for c in users)])
        if owned and owned[0][0] == "module":
            _steps(installed, state, stage, model)
            _epoch_ends(installed, state, model)
            _pretraining(installed, state, model)
            _progress_bar(installed, state, model)
            if stage == "fit":
                _one_optimizer_without_index(installed, state, model)
        _loaders(installed, state, stage, owned)
        check_hooks(model, users, datamodule)
        if spawn_1x:
            _prepare_before_spawn(installed, state, owned)
        callbacks.insert(0, first)
        callbacks.append(last)
        yield state
    finally:
        for callback in (first, last):
            if callback in callbacks:
                callbacks.remove(callback)
        installed.undo()


def _as_2x(r: Redirect, *args: Any, **kwargs: Any) -> Any:
    native_amp = getattr(r.stage.trainer.precision_plugin, "scaler", None) is not None
    return as_2x(r.name, r.original, native_amp=native_amp)(*args, **kwargs)


@contextlib.contextmanager
def one_optimizer_1x_hooks(trainer: pl.Trainer, model: Any) -> Iterator[None]:
    """For one stage: a 1.x ``optimizer_step`` / ``optimizer_zero_grad`` /
    ``configure_gradient_clipping`` of a one-optimizer module (the learning-rate warm-up of 1.x's
    docs), which Lightning 2.x would call without ``optimizer_idx``, gets 1.x's arguments
    (:mod:`ddpkit._compat_1x.optimizer_hooks`). Several optimizers: ``multi_optimizer_stage``
    does it."""
    installed, state = _Installed(), Stage(trainer)
    if isinstance(model, pl.LightningModule):
        for name in HOOKS:
            if takes_optimizer_idx(getattr(model, name)):
                installed.set(model, name, Redirect(model, name, _as_2x, state))
    try:
        yield
    finally:
        installed.undo()
