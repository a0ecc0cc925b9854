"""A ``Trainer(...)`` call of Lightning 1.x or 2.x → the Lightning 2.x Trainer that means the same.

Three steps, in order, each before any rank starts:

1. 1.x-only names are refused with their replacement (a removed training type such as
   ``strategy="dp"``), and a keyword neither Lightning 2.x nor 1.x ever had is refused with a
   did-you-mean.
2. Each non-device keyword of 1.x becomes its 2.x spelling (:mod:`ddpkit.lightning._keywords`).
3. A call with 1.x device flags is resolved by ddpkit's connector — the same ``Plan``, the same
   reasons, the same ``ddpkit explain`` — and the plan becomes Lightning's device arguments
   (:mod:`ddpkit.lightning._devices`). A call in 2.x's own device spelling is left to Lightning.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, get_args

import pytorch_lightning as pl
from pytorch_lightning.accelerators import AcceleratorRegistry
from pytorch_lightning.callbacks import ProgressBar, TQDMProgressBar
from pytorch_lightning.strategies import StrategyRegistry

from ddpkit._compat_1x.keywords import is_value
from ddpkit._flag_names import ACCELERATOR_NAMES, LEGACY_ACCELERATORS, TRAINING_TYPES
from ddpkit.connector import AcceleratorConnector, Plan, Probe
from ddpkit.connector._flags import DEVICE_FLAGS
from ddpkit.errors import (
    DDPKitDeprecationWarning,
    DDPKitError,
    DDPKitWarning,
    MisconfigurationError,
)
from ddpkit.lightning._device_flags import (
    device_call,
    is_legacy_device_call,
    quoted,
    removed_strategy,
)
from ddpkit.lightning._devices import LightningDevices, lightning_devices
from ddpkit.lightning._keywords import KEYWORDS, Rewrite, apply_keyword, callback_list
from ddpkit.lightning._lightning_private import _PRECISION_INPUT
from ddpkit.utilities._reprs import safe_repr
from ddpkit.utilities._suggest import choices, did_you_mean

#: The keywords of the installed Lightning's Trainer.
LIGHTNING_KEYWORDS = tuple(inspect.signature(pl.Trainer.__init__).parameters)[1:]
#: 1.x device keywords the connector reads and Lightning 2.x does not have.
_LEGACY_DEVICE_KEYWORDS = ("gpus", "num_processes")
#: The names ddpkit's connector takes besides Lightning's (1.x's training types among them).
_CONNECTOR_NAMES = {
    "accelerator": (*ACCELERATOR_NAMES, *LEGACY_ACCELERATORS),
    "strategy": tuple(TRAINING_TYPES),
}
#: Device keywords whose Lightning 2.x default is "auto" and whose 1.x default was None.
_AUTO_DEVICE_KEYWORDS = ("accelerator", "devices", "strategy")


@dataclass(frozen=True)
class Translation:
    """What a call became."""

    kwargs: dict[str, Any]
    """Keyword arguments for ``pytorch_lightning.Trainer``."""
    rewrite: Rewrite
    """What the 1.x keywords asked of the stages (resume, prepare_data_per_node, tune ...)."""
    plan: Plan | None = None
    """The connector's plan for a call with 1.x device flags; None for a 2.x device call."""
    devices: LightningDevices | None = None
    """The plan as Lightning's objects, with the Lightning 2.x call that means the same."""
    deprecations: tuple[str, ...] = ()
    """One message per 1.x spelling, device flags first."""
    notes: tuple[str, ...] = ()
    """The plan's other warnings (GPUs given but unused, a job of several tasks without srun)."""


def _check_names(kwargs: Mapping[str, Any]) -> None:
    known = (*LIGHTNING_KEYWORDS, *_LEGACY_DEVICE_KEYWORDS, *KEYWORDS)
    for name in kwargs:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"Did you mean {close[0]}=?" if close else "Fix: drop it."
            raise MisconfigurationError(
                f"Trainer({name}=...): no such keyword in Lightning 2.x's Trainer, nor in 1.x's. "
                f"{hint}"
            )
    # 1.x's three places for a training type's name (distributed_backend: before 1.2)
    for flag in ("distributed_backend", "accelerator", "strategy"):
        removed_strategy(flag, kwargs.get(flag))
    plugins = kwargs.get("plugins")
    for plugin in plugins if isinstance(plugins, list | tuple) else [plugins]:
        removed_strategy("plugins", plugin)


def _check_device_names(kwargs: Mapping[str, Any]) -> None:
    """A name neither Lightning 2.x nor ddpkit's connector knows, in a call left to Lightning:
    refused here with a did-you-mean over both (Lightning's own message lists only its own)."""
    for flag, lightning_names in (
        ("accelerator", (*AcceleratorRegistry.available_accelerators(), "auto", "gpu")),
        ("strategy", (*StrategyRegistry.available_strategies(), "auto")),
    ):
        value = kwargs.get(flag)
        # Lightning matches a strategy in any case, an accelerator exactly.
        given = value.lower() if isinstance(value, str) and flag == "strategy" else value
        if not isinstance(value, str) or given in lightning_names:
            continue
        names = sorted({*lightning_names, *_CONNECTOR_NAMES[flag]})
        hint = did_you_mean(value, names)
        raise MisconfigurationError(
            f"Trainer({flag}={value!r}): no such {flag} in Lightning 2.x, nor in 1.x{hint}. "
            f"Choose one of {choices(names)}."
        )
    _check_precision(kwargs.get("precision"))


def _check_precision(value: Any) -> None:
    """A precision Lightning 2.x takes, by type too: its own check lets ``32.0`` through (it
    equals 32) and then fails with ``RuntimeError: No precision set``; any other value is a bare
    ``ValueError``."""
    names: tuple[Any, ...] = tuple(
        a for alias in get_args(_PRECISION_INPUT) for a in get_args(alias)
    )
    if value is None or is_value(value, names):
        return
    hint = did_you_mean(str(value).removesuffix(".0"), [str(n) for n in names])
    raise MisconfigurationError(
        f"Trainer(precision={safe_repr(value)}): no such precision in Lightning 2.x{hint}. "
        f"Choose one of {choices([str(n) for n in names if isinstance(n, str)])}."
    )


def _callbacks(given: Any, rewrite: Rewrite) -> list[Any] | Any:
    """The user's callbacks, then those the 1.x keywords became. A progress bar of the user's
    own wins over ``progress_bar_refresh_rate`` / ``process_position``, as in 1.x, and without a
    bar (``enable_progress_bar=False``, ``progress_bar_refresh_rate=0``) ``process_position`` has
    nothing to place, as in 1.x."""
    bar = rewrite.progress_bar and rewrite.kwargs.get("enable_progress_bar") is not False
    if not rewrite.callbacks and not bar:
        return given
    callbacks = callback_list(given) + rewrite.callbacks
    if bar and not any(isinstance(c, ProgressBar) for c in callbacks):
        callbacks.append(TQDMProgressBar(**rewrite.progress_bar))
    return callbacks


def _resolve(
    kwargs: dict[str, Any], probe: Probe | None, supervise: bool
) -> tuple[Plan, LightningDevices, list[str]]:
    flags, passthrough = device_call(kwargs)
    # The connector warns in its own words (ddpkit's spelling); the Trainer warns once, in
    # Lightning's. Its other warnings are passed on as they are.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DDPKitWarning)
        connector = AcceleratorConnector(flags, probe)
    notes = [
        str(w.message)
        for w in caught
        if issubclass(w.category, DDPKitWarning)
        and not issubclass(w.category, DDPKitDeprecationWarning)
    ]
    devices = lightning_devices(connector.plan, connector.built, passthrough, supervise=supervise)
    return connector.plan, devices, notes


def _device_message(plan: Plan, devices: LightningDevices) -> str:
    message = (
        f"{plan.call}: Lightning 2.x refuses these 1.x device flags; ddpkit resolves them as "
        f"1.x did (`ddpkit explain` shows how). The same run, in Lightning 2.x's spelling: "
        f"{devices.call}"
    )
    if plan.launcher.value == "spawn" and "spawn" not in plan.call.lower():
        message += (
            f". It starts its {plan.world_size} ranks with spawn, the 1.x default for several "
            f"devices; strategy='ddp' would re-run the script instead (faster start-up, no "
            f"pickling)"
        )
    return message + "."


#: Lightning 2.x's strategies of forked ranks, each with its find_unused_parameters variants
_FORKED = ("ddp_notebook", "ddp_fork")


def translate_call(kwargs: Mapping[str, Any], probe: Probe | None = None) -> Translation:
    """Translate a call (see the module). ``probe`` is the machine (tests pass a fake one).

    ``supervise`` (ddpkit's own keyword): ``None`` (the default) runs a call ddpkit's connector
    resolved — one with 1.x device flags — on ddpkit's launchers (``SupervisedDDPStrategy``) and
    leaves a 2.x call to Lightning; ``True`` resolves any device call through the connector and
    supervises it; ``False`` runs the plan on Lightning's own ``DDPStrategy``."""
    kwargs = dict(kwargs)
    supervise = kwargs.pop("supervise", None)
    if supervise is not None and not isinstance(supervise, bool):
        raise MisconfigurationError(
            f"Trainer(supervise={supervise!r}): pass True, False, or leave it out (None: ddpkit "
            f"supervises the ranks when it resolved the device flags)."
        )
    _check_names(kwargs)
    rewrite = Rewrite(kwargs={k: v for k, v in kwargs.items() if k not in KEYWORDS}, given=kwargs)
    for name, row in KEYWORDS.items():
        if name in kwargs:
            apply_keyword(row, kwargs[name], rewrite)
    lightning = rewrite.kwargs
    for name in _LEGACY_DEVICE_KEYWORDS:
        if name in lightning and lightning[name] is None:  # their 1.x default: no device flag
            del lightning[name]
    callbacks = _callbacks(lightning.get("callbacks"), rewrite)
    if callbacks is not None:
        lightning["callbacks"] = callbacks
    # A 1.x device call: 1.x's spellings, or 1.x's None defaults (which Lightning 2.x refuses).
    spelled = is_legacy_device_call(lightning)
    legacy = spelled or any(
        name in lightning and lightning[name] is None for name in _AUTO_DEVICE_KEYWORDS
    )
    if supervise is None and str(lightning.get("strategy", "")).startswith(_FORKED):
        supervise = True  # forked ranks (a notebook's): ddpkit's fork launcher supervises them
    if not legacy and not supervise:
        _check_device_names(lightning)
        return Translation(kwargs=lightning, rewrite=rewrite, deprecations=tuple(rewrite.messages))
    for name in _AUTO_DEVICE_KEYWORDS:  # 2.x's "auto" (and 1.x's None) ask for nothing here
        if lightning.get(name, "auto") in ("auto", None):
            lightning.pop(name, None)
    plan, devices, notes = _resolve(lightning, probe, supervise is not False)
    for name in DEVICE_FLAGS:
        lightning.pop(name, None)
    lightning.update(devices.kwargs())
    return Translation(
        kwargs=lightning,
        rewrite=rewrite,
        plan=plan,
        devices=devices,
        deprecations=(
            *([_device_message(plan, devices)] if spelled else []),
            *rewrite.messages,
        ),
        notes=tuple(notes),
    )


#: The bare Python errors Lightning 2.x's Trainer raises for some values (a comparison of a str
#: with an int, a method of the wrong type, torch's own checks).
_RAW = (TypeError, ValueError, AttributeError, KeyError, RuntimeError, OverflowError)


@contextlib.contextmanager
def lightning_refusals(kwargs: Mapping[str, Any]) -> Iterator[None]:
    """Around Lightning's ``Trainer.__init__``: a bare Python error it raises for a value is a
    ``MisconfigurationError`` quoting the call, with Lightning's words (and chained to them).
    Lightning's own ``MisconfigurationException`` passes as it is."""
    try:
        yield
    except _RAW as err:
        if isinstance(err, DDPKitError):
            raise
        raise MisconfigurationError(
            f"{quoted(kwargs)}: Lightning 2.x's Trainer refused a value ({type(err).__name__}: "
            f"{err}). Fix: pass each keyword a value of the type pytorch_lightning.Trainer "
            f"documents for it."
        ) from err
