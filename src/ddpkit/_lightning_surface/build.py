"""Build the Lightning 2.x surface table (``surface_2x.json``) from the facts of the installed
Lightning (``facts_2x.json``), the rules of :mod:`~ddpkit._lightning_surface.rules` and ddpkit's
own classes. Lightning is not imported: the facts say what it has.

Each class, constructor keyword and member gets one status:

- a class: *same* when ddpkit has its counterpart (:data:`rules.COUNTERPARTS`, else the same
  name in ``ddpkit.callbacks`` / ``ddpkit.loggers``); else its :data:`rules.CLASS_RULES` entry,
  which its keywords and members take too;
- a keyword or member: its :data:`rules.RULES` entry where there is one; else *same* when the
  counterpart has it alike — a keyword with the same default (or one of
  :data:`rules.EQUIVALENT_DEFAULTS`), a method or hook taking every call Lightning's takes, a
  property or attribute that reads (and sets, where Lightning's does), a hook ddpkit's loop
  calls by name (:data:`rules.CALLED_WHEN_DEFINED`).

An entry left without a status is an error naming it (with what differs): the table is never
written with a gap. ``scripts/lightning_2x_table.py`` writes it; a test builds it again and
compares.
"""

from __future__ import annotations

import fnmatch
import functools
import importlib
import inspect
import json
import warnings
from typing import Any

from ddpkit._lightning_surface import rules
from ddpkit._lightning_surface.rules import SAME, Rule
from ddpkit._lightning_surface.signatures import defaults_differ, incompatible, unsettable


class UnresolvedError(LookupError):
    """Entries that the rules leave without a status (of this table, and of the 1.x one:
    :mod:`ddpkit.lightning._surface.build`)."""


def _import(target: str) -> Any:
    module, _, name = target.partition(":")
    value: Any = importlib.import_module(module)
    for attr in name.split("."):
        value = getattr(value, attr)
    return value


def counterpart(owner: str, info: dict[str, Any]) -> type | None:
    """ddpkit's class for Lightning's ``owner``, or None."""
    if owner in rules.COUNTERPARTS:
        found: type = _import(rules.COUNTERPARTS[owner])
        return found
    package = rules.SEARCHED.get(info["exported"])
    if package is None:
        return None
    module = importlib.import_module(package)
    value = vars(module).get(owner)  # never the module's __getattr__ (it refuses)
    return value if isinstance(value, type) and owner in module.__all__ else None


_FACTORY_ARGS: dict[str, dict[str, Any]] = {
    "Trainer": {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
                "enable_model_summary": False},
    "EarlyStopping": {"monitor": "loss"},
}  # fmt: skip


@functools.cache
def instance_of(owner: str, cls: type) -> Any:
    """One instance of ddpkit's class, to read its attributes (None for an abstract one)."""
    if inspect.isabstract(cls):
        return None
    kwargs = dict(_FACTORY_ARGS.get(owner, {}))
    if "save_dir" in inspect.signature(cls).parameters:
        kwargs["save_dir"] = "logs"  # a logger makes no folder before it writes
    if owner == "LightningModule":
        cls = type("Net", (cls,), {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(**kwargs)


def role(owner: str, name: str, fact: dict[str, Any]) -> str:
    """``hook`` (Lightning calls it on the user's object), ``setting`` (Lightning reads it from
    the user's object) or ``api`` (the user calls or reads it)."""
    if owner == "Callback":
        return "api" if name == "state_key" else "hook"
    if owner in ("LightningModule", "LightningDataModule"):
        if name in rules.SETTINGS:
            return "setting"
        hook_mixin = fact.get("defined_in", "").startswith("pytorch_lightning.core.hooks:")
        if hook_mixin or name in rules.HOOKS or name.endswith("_dataloader"):
            return "hook"
    return "api"


def _test_of(key: str) -> str | None:
    for test, patterns in rules.COMPARED.items():
        if any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns):
            return test
    return None


def _from_rule(rule: Rule) -> dict[str, str]:
    """The rule's fields that are set (every rule has a status and a note)."""
    return {field: value for field, value in rule._asdict().items() if value}


def member_status(owner: str, name: str, fact: dict[str, Any], ours: type) -> dict[str, str]:
    """The status of Lightning's ``owner.name`` on ddpkit's class ``ours``."""
    key = f"{owner}.{name}"
    if key in rules.RULES:
        return _from_rule(rules.RULES[key])
    instance = instance_of(owner, ours)
    kind = fact["kind"]
    raw = inspect.getattr_static(ours, name, None)
    if raw is None and not (instance is not None and name in vars(instance)):
        if role(owner, name, fact) == "hook" and name in rules.CALLED_WHEN_DEFINED:
            return {"status": SAME, "note": "ddpkit's loop calls it when the class defines it"}
        raise UnresolvedError(f"member {key} ({kind}): ddpkit's {ours.__name__} has none")
    generic = all(p["kind"] in ("*args", "**kwargs") for p in fact.get("parameters", []))
    if kind in ("method", "classmethod", "staticmethod") and not generic:
        excused = frozenset(
            p["name"] for p in fact["parameters"]
            if f"{key}({p['name']})" in rules.EQUIVALENT_DEFAULTS
        )  # fmt: skip
        why = incompatible(fact["parameters"], getattr(ours, name), excused)
        if why is not None:
            raise UnresolvedError(f"member {key}{fact['signature']}: ddpkit's {why}")
    settable = kind == "attribute" or fact.get("settable")
    if settable and unsettable(ours, instance, name):
        raise UnresolvedError(f"member {key} ({kind}): ddpkit's cannot be set")
    return {"status": SAME}


def keyword_status(key: str, param: dict[str, str], ours: type) -> dict[str, str]:
    """The status of Lightning's constructor keyword ``key`` on ddpkit's class ``ours``."""
    name, kind = param["name"], param["kind"]
    if key in rules.RULES:
        return _from_rule(rules.RULES[key])
    mine = inspect.signature(ours).parameters
    if kind in ("*args", "**kwargs"):
        wanted = (
            inspect.Parameter.VAR_POSITIONAL if kind == "*args" else inspect.Parameter.VAR_KEYWORD
        )
        if any(p.kind is wanted for p in mine.values()):
            return {"status": SAME}
        raise UnresolvedError(f"keyword {key}: ddpkit's {ours.__name__} takes none")
    if name not in mine:
        raise UnresolvedError(f"keyword {key}: ddpkit's {ours.__name__} has no {name!r}")
    if defaults_differ(param.get("default"), mine[name].default):
        if key in rules.EQUIVALENT_DEFAULTS:
            return {"status": SAME, "note": rules.EQUIVALENT_DEFAULTS[key]}
        raise UnresolvedError(
            f"keyword {key}: default {mine[name].default!r}, Lightning's {param.get('default')}"
        )
    return {"status": SAME}


def _path(cls: type | None) -> str:
    return f"{cls.__module__}:{cls.__qualname__}" if cls is not None else ""


def _spelled(owner: str, info: dict[str, Any], ours: type | None) -> str:
    """How a user names ddpkit's class: ``ddpkit.Module``, ``ddpkit.callbacks.Timer``."""
    if ours is None:
        return ""
    if owner in rules.COUNTERPARTS:
        return f"ddpkit.{ours.__name__}"
    return f"{rules.SEARCHED[info['exported']]}.{owner}"


def _class_entries(
    owner: str, info: dict[str, Any], out: dict[str, Any], missing: list[str]
) -> None:
    ours = counterpart(owner, info)
    if ours is None and owner not in rules.CLASS_RULES:
        missing.append(f"class {owner}: ddpkit has none, and no rule says why")
        return
    inherited = None if ours is not None else _from_rule(rules.CLASS_RULES[owner])
    found = {"status": SAME, "path": _path(ours), "ddpkit": _spelled(owner, info, ours)}
    out["classes"][owner] = {
        "exported": info["exported"], "bases": info["bases"],
        **(found if ours is not None else dict(inherited or {})),
    }  # fmt: skip
    for param in info.get("keywords") or []:
        prefix = "**" if param["kind"] == "**kwargs" else "*" if param["kind"] == "*args" else ""
        key = f"{owner}({prefix}{param['name']})"
        try:
            status = inherited or keyword_status(key, param, ours)  # type: ignore[arg-type]
        except UnresolvedError as err:
            missing.append(str(err))
            continue
        shown = {k: v for k, v in param.items() if k in ("default", "kind")}
        out["keywords"][key] = {**shown, **status, **_tested(key, status)}
    for name, fact in info["members"].items():
        key = f"{owner}.{name}"
        try:
            status = inherited or member_status(owner, name, fact, ours)  # type: ignore[arg-type]
        except UnresolvedError as err:
            missing.append(str(err))
            continue
        shown = {k: v for k, v in fact.items() if k in ("kind", "signature", "settable")}
        out["members"][key] = {**shown, "role": role(owner, name, fact), **status,
                               **_tested(key, status)}  # fmt: skip


def _tested(key: str, status: dict[str, str]) -> dict[str, str]:
    test = _test_of(key) if status["status"] == SAME else None
    return {"test": test} if test else {}


def build_table(facts: dict[str, Any]) -> dict[str, Any]:
    """The whole table; raises :class:`UnresolvedError` listing every entry without a status."""
    out: dict[str, Any] = {"lightning": facts["lightning"], "classes": {}, "keywords": {},
                           "members": {}}  # fmt: skip
    missing: list[str] = []
    for owner, info in sorted(facts["classes"].items()):
        _class_entries(owner, info, out, missing)
    if missing:
        raise UnresolvedError(
            f"{len(missing)} Lightning 2.x entries have no status:\n" + "\n".join(missing)
        )
    return out


def dumps(table: dict[str, Any]) -> str:
    """The table as committed (this one and the 1.x one): one entry a line, keys sorted."""
    return json.dumps(table, indent=0, sort_keys=True, ensure_ascii=False) + "\n"
