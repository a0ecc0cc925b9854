"""Lightning 1.x's public surface, as data, and what ``ddpkit.lightning`` does with each entry.

``facts_1x.json`` is what Lightning 1.0–1.9 had, read from the released wheels
(``scripts/lightning_1x_surface.py extract``): every public module path and name, and the members
of ``Trainer``, ``LightningModule``, ``LightningDataModule`` and ``Callback`` with their
signatures. ``surface_1x.json`` is the table built from it (``scripts/lightning_1x_surface.py
table``, :mod:`ddpkit.lightning._surface.build`): every entry with one status —

- ``unchanged``: Lightning 2.x has it at the same path, and ddpkit passes it through;
- ``provided``: ``ddpkit.lightning`` provides it with 1.x semantics (a name that moved, or
  ddpkit's own implementation: :data:`~ddpkit.lightning._surface.rules.PROVIDED`);
- ``refused``: using it raises :class:`~ddpkit.errors.LightningRemovedError` with the 2.x fix;
- ``out of scope``: the same error, saying why ddpkit leaves it out.

This module answers the mirror's questions at run time; it reads the table only when a name is
not found the quick way (provided, or Lightning 2.x's own).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

from ddpkit.errors import LightningRemovedAttributeError, LightningRemovedError
from ddpkit.lightning._surface.refusals import NOT_SERVED
from ddpkit.lightning._surface.rules import MOVED_MODULES, PROVIDED, PROVIDED_MODULES, SUBSTITUTES

__all__ = [
    "STATUSES",
    "has_names",
    "honour",
    "is_module",
    "load",
    "module_entry",
    "name_entry",
    "names_of",
    "provided",
    "refuse_member",
    "substitute",
    "substitute_target",
    "target_module",
]

#: The statuses an entry can have, in the order the docs list them.
STATUSES = ("unchanged", "provided", "refused", "out of scope")
TABLE = Path(__file__).with_name("surface_1x.json")


@functools.cache
def load() -> dict[str, Any]:
    """The committed table (``surface_1x.json``)."""
    table: dict[str, Any] = json.loads(TABLE.read_text())
    return table


def _import_object(target: str) -> Any:
    """``"package.module:attr.attr"`` (or a module path alone) → the object."""
    module_name, _, attrs = target.partition(":")
    value: Any = importlib.import_module(module_name)
    for attr in filter(None, attrs.split(".")):
        value = getattr(value, attr)
    return value


def provided(dotted: str) -> Any:
    """The object ddpkit provides for the 1.x name ``dotted``, or None."""
    target = PROVIDED.get(dotted)
    return None if target is None else _import_object(target)


@functools.cache
def _substitutes() -> dict[int, str]:
    """id of Lightning 2.x's object → the target of ddpkit's (:data:`rules.SUBSTITUTES`)."""
    return {id(_import_object(theirs)): ours for theirs, ours in SUBSTITUTES.items()}


def substitute_target(value: Any) -> str | None:
    """The target of ddpkit's object standing for Lightning's ``value``, or None."""
    return _substitutes().get(id(value))


def substitute(value: Any) -> Any:
    """ddpkit's object where ``value`` is one of Lightning's it stands for, else ``value``."""
    target = substitute_target(value)
    return value if target is None else _import_object(target)


@functools.cache
def _lightning_has(path: str) -> bool:
    """Does the installed Lightning 2.x have the module ``path``?"""
    if path in sys.modules:
        return True
    try:
        return importlib.util.find_spec(path) is not None
    except (ImportError, ValueError):
        return False


def is_module(path: str) -> bool:
    """Is ``path`` a module path of Lightning 1.x or of the installed 2.x?"""
    return path in load()["modules"] or path in PROVIDED_MODULES or _lightning_has(path)


def target_module(path: str) -> types.ModuleType | None:
    """The module behind the mirror of ``path``: ddpkit's (``pytorch_lightning.metrics``), the
    2.x module it moved to, or 2.x's at the same path; None when there is none."""
    if path in PROVIDED_MODULES:
        return importlib.import_module(PROVIDED_MODULES[path])
    moved = MOVED_MODULES.get(path, path)
    served = any(path == p or path.startswith(p + ".") for p in NOT_SERVED)
    if served or not _lightning_has(moved):
        return None
    return importlib.import_module(moved)


def module_entry(path: str) -> dict[str, Any] | None:
    """The table's entry for the 1.x module ``path``."""
    entry: dict[str, Any] | None = load()["modules"].get(path)
    return entry


def name_entry(dotted: str) -> dict[str, Any] | None:
    """The table's entry for the 1.x name ``dotted`` (``module.Name``)."""
    entry: dict[str, Any] | None = load()["names"].get(dotted)
    return entry


def names_of(path: str) -> list[str]:
    """The 1.x names of the module ``path``."""
    entry = module_entry(path)
    return list(entry.get("names", ())) if entry else []


def has_names(path: str) -> bool:
    """Does ddpkit provide a 1.x name under ``path`` (so that the module imports, though 2.x
    dropped it)?"""
    prefix = path + "."
    return any(name.startswith(prefix) for name in PROVIDED)


def honour(dotted: str, entry: dict[str, Any]) -> Any:
    """What the entry's status says: a provided (moved) name is its object; a refused or
    out-of-scope one raises :class:`LightningRemovedError` with its fix or reason."""
    if entry["status"] == "provided" and entry.get("target"):
        return _import_object(entry["target"])
    if entry["status"] in ("refused", "out of scope"):
        raise LightningRemovedError(removed_message(dotted, entry))
    raise LookupError(f"{dotted}: the table's {entry['status']!r} entry names nothing to use")


def _gone(status: str, note: str) -> str:
    if status == "out of scope":
        return f"out of scope for ddpkit.lightning: {note}"
    said = any(word in note for word in ("removed", "became", "moved", "renamed", "folded"))
    return note if said else f"not in Lightning 2.x. {note}"


def removed_message(dotted: str, entry: dict[str, Any]) -> str:
    """``ddpkit.lightning.X (Lightning 1.0–1.6's pytorch_lightning.X): <why>. Fix: <fix>``."""
    mine = "ddpkit.lightning" + dotted[len("pytorch_lightning") :]
    since, until = entry.get("since", "1.0"), entry.get("until", "1.9")
    span = since if since == until else f"{since}–{until}"
    return f"{mine} (Lightning {span}'s {dotted}): {_gone(entry['status'], entry['note'])}"


def refuse_member(owner: str, name: str) -> None:
    """Raise :class:`LightningRemovedAttributeError` when ``owner.name`` (``"Trainer.gpus"``) is
    a 1.x member the table refuses or leaves out of scope; return otherwise."""
    if name.startswith("__"):
        return
    entry: dict[str, Any] | None = load()["members"].get(f"{owner}.{name}")
    if entry is None or entry["status"] not in ("refused", "out of scope"):
        return
    since, until = entry.get("since", "1.0"), entry.get("until", "1.9")
    span = since if since == until else f"{since}–{until}"
    raise LightningRemovedAttributeError(
        f"{owner}.{name} (Lightning {span}): {_gone(entry['status'], entry['note'])}"
    )
