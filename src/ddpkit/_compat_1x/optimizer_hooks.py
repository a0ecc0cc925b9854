"""Lightning 1.x's signatures of the optimization hooks, called the way Lightning 2.x calls them.

1.x passed ``optimizer_idx`` to ``optimizer_step``, ``optimizer_zero_grad`` and (1.5–1.9)
``configure_gradient_clipping``, and ``on_tpu`` / ``using_native_amp`` / ``using_lbfgs`` (by
keyword) to ``optimizer_step``; 2.x dropped them. A 1.x override (the learning-rate warm-up of
1.x's docs overrides ``optimizer_step``) called with 2.x's arguments takes the closure for
``optimizer_idx`` and never runs it. :func:`as_2x` wraps such a hook: it takes 2.x's arguments
and passes 1.x's, with the one optimizer's index 0.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

#: the hooks whose 1.x signature took ``optimizer_idx``
HOOKS = ("optimizer_step", "optimizer_zero_grad", "configure_gradient_clipping")


def takes_optimizer_idx(hook: Any) -> bool:
    """Whether ``hook`` has 1.x's ``optimizer_idx`` parameter."""
    try:
        return "optimizer_idx" in inspect.signature(hook).parameters
    except (TypeError, ValueError):
        return False


def keywords_of(hook: Any, flags: dict[str, Any]) -> dict[str, Any]:
    """The flags ``hook`` takes, by keyword, as 1.x passed them: 1.0–1.8 passed all three, 1.9
    ``on_tpu`` and ``using_lbfgs`` only, so an override of either release takes what it
    names (or all, with ``**kwargs``)."""
    try:
        parameters = inspect.signature(hook).parameters
    except (TypeError, ValueError):
        return flags
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return flags
    return {name: value for name, value in flags.items() if name in parameters}


def _lbfgs(optimizer: Any) -> bool:
    return isinstance(getattr(optimizer, "optimizer", optimizer), torch.optim.LBFGS)


def as_2x(name: str, hook: Callable[..., Any], native_amp: bool = False) -> Callable[..., Any]:
    """``hook`` (a bound 1.x ``name`` hook) as a function of 2.x's arguments."""
    if name == "optimizer_step":

        def optimizer_step(
            epoch: int, batch_idx: int, optimizer: Any, optimizer_closure: Any = None
        ) -> Any:
            flags = {"on_tpu": False, "using_native_amp": native_amp,
                     "using_lbfgs": _lbfgs(optimizer)}  # fmt: skip
            return hook(
                epoch, batch_idx, optimizer, 0, optimizer_closure, **keywords_of(hook, flags)
            )

        return optimizer_step
    if name == "optimizer_zero_grad":

        def optimizer_zero_grad(epoch: int, batch_idx: int, optimizer: Any) -> Any:
            return hook(epoch, batch_idx, optimizer, 0)

        return optimizer_zero_grad

    def configure_gradient_clipping(
        optimizer: Any, gradient_clip_val: Any = None, gradient_clip_algorithm: Any = None
    ) -> Any:
        return hook(optimizer, 0, gradient_clip_val, gradient_clip_algorithm)

    return configure_gradient_clipping
