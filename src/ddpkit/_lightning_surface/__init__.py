"""Lightning 2.x's public surface on ddpkit's own objects, as data, and what ddpkit does with a
Lightning name it lacks.

``facts_2x.json`` is what the installed Lightning 2.x has (``scripts/lightning_2x_surface.py``):
every public member and constructor keyword of ``Trainer``, ``LightningModule``,
``LightningDataModule``, ``Callback``, the built-in callbacks and the loggers.
``surface_2x.json`` is the table built from it (``scripts/lightning_2x_table.py``,
:mod:`ddpkit._lightning_surface.build`): each entry with one status for ddpkit's counterpart —
*same*, *refused* (with the fix), *difference* (a row of docs/flags.md's Differences table) or
*out of scope* (with the reason). docs/lightning-2x-surface.md is its page.

What the statuses do, here, at run time (the table is read only when a name is missed):

- a member ddpkit lacks, used on ddpkit's object (``module.manual_backward``,
  ``trainer.fit_loop``): :class:`~ddpkit.errors.LightningOnlyAttributeError` naming it and the
  way (:func:`refuse_attribute`, called by the classes' ``__getattr__``);
- a keyword a ddpkit callback or logger lacks: :class:`~ddpkit.errors.UnknownKeywordError`
  (:func:`check_keywords`, from their ``__new__``);
- a class ``ddpkit.callbacks`` / ``ddpkit.loggers`` lack:
  :class:`~ddpkit.errors.LightningOnlyImportError` (:func:`refuse_import`);
- a hook or setting ddpkit's loop would never call or read, defined on the user's module, data
  module or callback — or one of Lightning's own callbacks given to ``ddpkit.Trainer``: a
  ``MisconfigurationError`` before any rank starts (:func:`check_defined`).
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ddpkit._compat_1x.hooks import CALLED_BY_DDPKIT_TRAINER, COMMON_NAMES, INSTEAD, REMOVED
from ddpkit.errors import (
    LightningOnlyAttributeError,
    LightningOnlyImportError,
    MisconfigurationError,
    UnknownKeywordError,
)
from ddpkit.utilities._reprs import safe_repr
from ddpkit.utilities._suggest import did_you_mean

__all__ = [
    "LightningCounterpart",
    "ReadOnlySettings",
    "check_defined",
    "check_keywords",
    "load",
    "missing",
    "owners_of",
    "refuse_attribute",
    "refuse_import",
    "refused_setting",
]

TABLE = Path(__file__).with_name("surface_2x.json")
_LACKING = ("refused", "out of scope")
#: Modules whose classes are ddpkit's, Lightning's or torch's own (never the user's).
_LIBRARIES = ("ddpkit.", "pytorch_lightning.", "lightning.", "lightning_fabric.", "torch.")


@functools.cache
def load() -> dict[str, Any]:
    """The committed table (``surface_2x.json``)."""
    table: dict[str, Any] = json.loads(TABLE.read_text())
    return table


@functools.cache
def _by_path() -> dict[str, str]:
    """``module:qualname`` of ddpkit's class → the Lightning class it stands for."""
    return {e["path"]: owner for owner, e in load()["classes"].items() if "path" in e}


_OWNERS: dict[type, tuple[str, ...]] = {}


def owners_of(cls: type) -> tuple[str, ...]:
    """The Lightning classes whose names ``cls`` answers for (ddpkit's ``ModelCheckpoint`` and
    its subclasses: ``("ModelCheckpoint", "Callback")``)."""
    found = _OWNERS.get(cls)
    if found is None:
        paths = _by_path()
        owners = (paths.get(f"{c.__module__}:{c.__qualname__}") for c in cls.__mro__)
        found = _OWNERS[cls] = tuple(dict.fromkeys(o for o in owners if o is not None))
    return found


def _lacking(owners: Iterable[str], name: str) -> tuple[str, dict[str, Any]] | None:
    members = load()["members"]
    for owner in owners:
        entry = members.get(f"{owner}.{name}")
        if entry is not None and entry["status"] in _LACKING:
            return owner, entry
    return None


def _said(owner: str, name: str, entry: dict[str, Any], what: str) -> str:
    """``Lightning's Owner.name is not in ddpkit.X: <note>``."""
    ours = load()["classes"][owner].get("ddpkit", "ddpkit")
    verb = "is out of ddpkit's scope" if entry["status"] == "out of scope" else f"is not in {ours}"
    return f"Lightning's {owner}{what}{name} {verb}: {entry['note']}"


def refuse_attribute(obj: Any, name: str) -> None:
    """Raise :class:`LightningOnlyAttributeError` when ``name`` is a Lightning member ddpkit's
    class of ``obj`` lacks; return otherwise (the caller raises the plain AttributeError)."""
    if name.startswith("_"):
        return
    found = _lacking(owners_of(type(obj)), name)
    if found is not None:
        owner, entry = found
        raise LightningOnlyAttributeError(
            f"{type(obj).__name__}.{name}: {_said(owner, name, entry, '.')}"
        )


def missing(obj: Any, name: str) -> Any:
    """What ``obj.name`` is when the usual lookup failed (a class's ``__getattr__``): Lightning's
    name ddpkit lacks raises :class:`LightningOnlyAttributeError`; a property that raised an
    AttributeError raises it again (not this function's); anything else, Python's error."""
    refuse_attribute(obj, name)
    if inspect.getattr_static(type(obj), name, None) is not None:
        return object.__getattribute__(obj, name)
    raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}", name=name)


def refused_setting(obj: Any, name: str, value: Any) -> LightningOnlyAttributeError | None:
    """The error for ``obj.name = value`` where ddpkit's ``name`` is a read-only property and
    Lightning's can be set (a *difference* entry), else None."""
    raw = inspect.getattr_static(type(obj), name, None)
    if name.startswith("_") or not isinstance(raw, property) or raw.fset is not None:
        return None
    for owner in owners_of(type(obj)):
        entry = load()["members"].get(f"{owner}.{name}")
        if entry is not None and entry["status"] == "difference":
            return LightningOnlyAttributeError(
                f"{type(obj).__name__.lower()}.{name} = {safe_repr(value)}: Lightning's "
                f"{owner}.{name} can be set; ddpkit's is {entry['note']} (docs/flags.md, "
                f"Differences from Lightning: {entry['row']!r})."
            )
    return None


def refuse_import(package: str, name: str) -> None:
    """Raise :class:`LightningOnlyImportError` when ``package.name`` stands for one of
    Lightning's classes that ddpkit does not have."""
    if name.startswith("_"):
        return
    entry = load()["classes"].get(name)
    if entry is None or entry["status"] not in _LACKING:
        return
    if entry["exported"].replace("pytorch_lightning", "ddpkit") != package:
        return
    verb = "is out of ddpkit's scope" if entry["status"] == "out of scope" else "is not in ddpkit"
    raise LightningOnlyImportError(
        f"{package}.{name}: Lightning's {entry['exported']}.{name} {verb}: {entry['note']}",
        name=name,
    )


@functools.cache
def _accepted(init: Any) -> tuple[frozenset[str], bool]:
    """The keywords ``init`` takes, and whether it takes any (``**kwargs``)."""
    if init is object.__init__:
        return frozenset(), False
    params = list(inspect.signature(init).parameters.values())[1:]
    names = frozenset(p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    return names, any(p.kind is p.VAR_KEYWORD for p in params)


def check_keywords(cls: type, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Refuse, with :class:`UnknownKeywordError`, a keyword that ddpkit's own constructor of
    ``cls`` (a built-in callback or logger, or a subclass keeping its ``__init__``) does not
    take: Lightning's (why, and the way) or a misspelling (the keywords it takes). A class that
    defines ``__new__`` gets no check of its arguments from ``object.__init__``: a class
    without an ``__init__`` of its own refuses any argument here."""
    init = cls.__init__  # type: ignore[misc]
    if init is not object.__init__ and not init.__module__.startswith("ddpkit."):
        return  # the user's own __init__: Python's own error names it
    if args and init is object.__init__:
        raise UnknownKeywordError(f"{cls.__name__}({safe_repr(args[0])}): takes no arguments.")
    names, takes_any = _accepted(init)
    unknown = [key for key in kwargs if key not in names]
    if not unknown or takes_any:
        return
    key = unknown[0]
    call = f"{cls.__name__}({key}={safe_repr(kwargs[key])})"
    keywords = load()["keywords"]
    for owner in owners_of(cls):
        entry = keywords.get(f"{owner}({key})") or next(
            (e for k, e in keywords.items() if k.startswith(f"{owner}(**")), None
        )
        if entry is not None and entry["status"] in _LACKING:
            raise UnknownKeywordError(f"{call}: {_said(owner, key, entry, ' keyword ')}")
    hint = did_you_mean(key, sorted(names)) or f". It takes: {', '.join(sorted(names)) or 'none'}"
    raise UnknownKeywordError(f"{call}: no such keyword{hint}")


_UNSET = object()
#: what Lightning's own ``__init__`` sets these to: the same value on an object whose class is
#: a Lightning one (a ``LightningDataModule`` given to ddpkit) is Lightning's, not the user's
_LIGHTNING_INIT = {"allow_zero_length_dataloader_with_multiple_devices": False}


def _users(obj: Any, name: str) -> bool:
    """Does the user's code define ``name`` on ``obj`` (its class, or set it on the object)?"""
    if name in getattr(obj, "__dict__", {}):
        lightning = any(c.__module__.startswith(_LIBRARIES) for c in type(obj).__mro__)
        default = _LIGHTNING_INIT.get(name, _UNSET)
        return not (lightning and obj.__dict__[name] is default)
    for cls in type(obj).__mro__:
        if name in vars(cls):
            return not cls.__module__.startswith(_LIBRARIES) and cls.__module__ != "builtins"
    return False


def _check_object(obj: Any, owners: tuple[str, ...]) -> None:
    members = load()["members"]
    for owner in owners:
        prefix = f"{owner}."
        for key, entry in members.items():
            if not key.startswith(prefix) or entry.get("role") not in ("hook", "setting"):
                continue
            name = key[len(prefix) :]
            if entry["status"] in _LACKING and _users(obj, name):
                what = "calls" if entry["role"] == "hook" else "reads"
                raise MisconfigurationError(
                    f"{type(obj).__name__}.{name}: {_said(owner, name, entry, '.')} — "
                    f"Lightning {what} it, ddpkit's loop never would."
                )


def _lightning_callback(callback: Any) -> None:
    """Lightning's own callbacks run on Lightning's loop only (they read its loop objects)."""
    cls = type(callback)
    if not cls.__module__.startswith(("pytorch_lightning.callbacks.", "lightning.pytorch.")):
        return
    entry = load()["classes"].get(cls.__name__)
    if entry is None or cls.__name__ == "Callback":
        return
    fix = (
        f"Fix: from ddpkit.callbacks import {cls.__name__} (the same keywords)"
        if entry["status"] == "same"
        else entry["note"]
    )
    raise MisconfigurationError(
        f"Trainer(callbacks=[{cls.__module__}.{cls.__name__}(...)]): Lightning's own callback "
        f"runs on Lightning's loop (it reads the loop's objects), not on ddpkit.Trainer's. {fix}"
    )


def check_defined(model: Any, datamodule: Any, callbacks: Iterable[Any]) -> None:
    """Before any rank starts: no hook or setting of Lightning's that ddpkit's loop would never
    call or read is defined on the module, the data module or a callback, and no callback is
    one of Lightning's own."""
    _check_object(model, ("LightningModule",))
    _check_removed_1x(model, "LightningModule")
    if datamodule is not None:
        _check_object(datamodule, ("LightningDataModule",))
        _check_removed_1x(datamodule, "LightningDataModule")
    for callback in callbacks:
        _lightning_callback(callback)
        _check_object(callback, (*owners_of(type(callback)), "Callback"))
        _check_removed_1x(callback, "Callback")


def _check_removed_1x(obj: Any, owner: str) -> None:
    """A hook of Lightning 1.x's ``owner`` that 2.x removed and ddpkit's loop never calls,
    defined by the user: it would never run, and the run would differ from 1.x's silently."""
    for name in sorted(REMOVED[owner] - CALLED_BY_DDPKIT_TRAINER - COMMON_NAMES):
        if _users(obj, name):
            raise MisconfigurationError(
                f"{type(obj).__name__}.{name}: a hook of Lightning 1.x's {owner} that Lightning "
                f"2.0 removed; ddpkit.Trainer never calls it. Fix: Lightning 2.x's spelling is "
                f"{INSTEAD[name]}; or run this 1.x code on ddpkit.lightning.Trainer, which calls "
                f"it where 1.x did."
            )


_T = TypeVar("_T", bound="LightningCounterpart")


class LightningCounterpart:
    """A base of ddpkit's ``Trainer``, ``DataModule``, ``Callback`` and ``Logger``: a Lightning
    member the class lacks raises :class:`LightningOnlyAttributeError` with the way
    (:func:`missing`, only when the usual lookup failed); a keyword its own constructor lacks
    raises :class:`UnknownKeywordError` (:func:`check_keywords`)."""

    def __new__(cls: type[_T], *args: Any, **kwargs: Any) -> _T:
        if args or kwargs:
            check_keywords(cls, args, kwargs)
        return super().__new__(cls)

    if not TYPE_CHECKING:  # mypy then sees only the members a class has (protocols are checked)

        def __getattr__(self, name: str) -> Any:
            return missing(self, name)


class ReadOnlySettings:
    """A base of ddpkit's ``Trainer``: setting one of its read-only properties that Lightning's
    Trainer lets code set raises :class:`LightningOnlyAttributeError` naming the Differences row
    (Python's own error names no fix)."""

    def __setattr__(self, name: str, value: Any) -> None:
        error = refused_setting(self, name, value)
        if error is not None:
            raise error
        object.__setattr__(self, name, value)
