"""The one place that calls hooks: on the callbacks, then on the module, in Lightning's order.

What each hook resolves to is found once, when the stage starts: a list of bound callables of
the callbacks and the module that really implement it. A hook nobody implements is an empty
tuple, so the per-step path tests one tuple and calls nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ddpkit.callbacks._base import Callback

if TYPE_CHECKING:
    from torch import nn

    from ddpkit.core._protocols import CallbackTrainer

# Base classes whose hooks do nothing: ddpkit's own and Lightning's (a LightningDataModule's
# loader hooks raise "must be implemented"; Lightning's Callback hooks are empty).
_MODULE_BASES = ("ddpkit.core.", "pytorch_lightning.", "lightning.", "torch.")
_CALLBACK_BASES = (
    ("ddpkit.callbacks._base", "Callback"),
    ("pytorch_lightning.callbacks.callback", "Callback"),
    ("lightning.pytorch.callbacks.callback", "Callback"),
)

#: callbacks that watch a metric: at ``on_train_epoch_end`` they run after the module's hook
MONITORING = ("ModelCheckpoint", "EarlyStopping")


def _own_hook(obj: Any, name: str, empty: Callable[[type], bool]) -> Callable[..., Any] | None:
    """The hook ``name`` unless the class that defines it is one whose hooks are ``empty``."""
    cls = next((cls for cls in type(obj).__mro__ if name in cls.__dict__), None)
    if cls is None or empty(cls):
        return None
    hook = getattr(obj, name, None)
    return hook if callable(hook) else None


def module_hook(obj: Any, name: str) -> Callable[..., Any] | None:
    """The hook ``name`` if the object's own class implements it (a placeholder inherited from
    ``ddpkit.Module``, a LightningModule or ``nn.Module`` does not count), else None."""
    return _own_hook(obj, name, lambda cls: cls.__module__.startswith(_MODULE_BASES))


#: the hooks a batch goes through on its way to the device, in order
TRANSFER_HOOKS = ("on_before_batch_transfer", "transfer_batch_to_device", "on_after_batch_transfer")


def transfer_hooks(datamodule: Any, model: Any) -> tuple[Callable[..., Any] | None, ...] | None:
    """Each of :data:`TRANSFER_HOOKS`: the DataModule's where it overrides it, else the
    module's (None: neither does). None when no hook is overridden: a batch is only moved."""
    found = tuple(
        next(
            (h for obj in (datamodule, model) if obj is not None and (h := module_hook(obj, n))),
            None,
        )
        for n in TRANSFER_HOOKS
    )
    return found if any(found) else None


def callback_hook(callback: Any, name: str) -> Callable[..., Any] | None:
    """The callback's hook ``name`` unless it is the empty one of a base ``Callback``."""
    return _own_hook(callback, name, _is_callback_base)


def _is_callback_base(cls: type) -> bool:
    return (cls.__module__, cls.__name__) in _CALLBACK_BASES


def _is_a(obj: Any, class_names: tuple[str, ...]) -> bool:
    """A class of one of these names is among the object's classes (ddpkit's or Lightning's)."""
    return any(cls.__name__ in class_names for cls in type(obj).__mro__)


class Dispatcher:
    """Calls ``callback.hook(trainer, module, *args)`` for every callback, then
    ``module.hook(*args)``. ``metrics``: the loop's metric store, told which hook runs (its
    ``fx``), as Lightning's ``_current_fx_name`` is: where ``self.log`` may be called."""

    def __init__(
        self,
        trainer: CallbackTrainer,
        module: nn.Module,
        callbacks: Sequence[Any],
        metrics: Any,
    ) -> None:
        self.trainer, self.module, self.callbacks = trainer, module, list(callbacks)
        self.metrics = metrics
        self._cache: dict[tuple[str, bool | None], tuple[Callable[..., Any], ...]] = {}

    def callback_hooks(
        self, name: str, monitoring: bool | None = None
    ) -> tuple[Callable[..., Any], ...]:
        """The callbacks' bound hooks, ``(trainer, module)`` already given. ``monitoring``: only
        the callbacks that watch a metric (True), only the others (False), or all (None)."""
        key = (name, monitoring)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = tuple(
                functools.partial(hook, self.trainer, self.module)
                for callback in self.callbacks
                if monitoring is None or _is_a(callback, MONITORING) is monitoring
                if (hook := callback_hook(callback, name)) is not None
            )
        return found

    def hooks(self, name: str) -> tuple[Callable[..., Any], ...]:
        """Every implementation of ``name``: the callbacks' first, then the module's."""
        key = ("*" + name, None)
        combined = self._cache.get(key)
        if combined is None:
            own = module_hook(self.module, name)
            combined = self.callback_hooks(name) + ((own,) if own is not None else ())
            self._cache[key] = combined
        return combined

    def call(self, name: str, *args: Any) -> None:
        hooks = self.hooks(name)
        if hooks:
            self._run(name, hooks, args)

    def call_callbacks(self, name: str, *args: Any, monitoring: bool | None = None) -> None:
        hooks = self.callback_hooks(name, monitoring)
        if hooks:
            self._run(name, hooks, args)

    def call_module(self, name: str, *args: Any) -> Any:
        hook = module_hook(self.module, name)
        return self._run(name, (hook,), args) if hook is not None else None

    def _run(self, name: str, hooks: tuple[Callable[..., Any], ...], args: tuple[Any, ...]) -> Any:
        """Each hook in turn, the store told it is ``name`` meanwhile; the last one's result."""
        store = self.metrics
        previous, store.fx = store.fx, name
        try:
            result = None
            for hook in hooks:
                result = hook(*args)
            return result
        finally:
            store.fx = previous

    def train_epoch_end(self) -> None:
        """Lightning's exception: the metric-watching callbacks run after the module."""
        self.call_callbacks("on_train_epoch_end", monitoring=False)
        self.call_module("on_train_epoch_end")
        self.call_callbacks("on_train_epoch_end", monitoring=True)


def is_callback(obj: Any) -> bool:
    """A ddpkit or Lightning ``Callback``, or any object with callback hooks."""
    return isinstance(obj, Callback) or any(map(_is_callback_base, type(obj).__mro__))


def merge_callbacks(callbacks: list[Any], extra: Any) -> list[Any]:
    """``configure_callbacks()`` results replace the Trainer's callbacks of the same type;
    checkpoint callbacks go last (Lightning's order)."""
    if not extra:
        return callbacks
    extra = list(extra) if isinstance(extra, list | tuple) else [extra]
    replaced = {type(cb) for cb in callbacks if any(isinstance(e, type(cb)) for e in extra)}
    merged = [cb for cb in callbacks if type(cb) not in replaced] + extra
    return sorted(merged, key=lambda cb: _is_a(cb, ("ModelCheckpoint",)))  # a stable sort
