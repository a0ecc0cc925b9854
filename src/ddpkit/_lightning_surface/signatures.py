"""Is ddpkit's member a drop-in for Lightning's? Lightning's signatures as the facts file spells
them (each parameter's name, kind and default repr, without ``self``).

- a method (or a hook) takes every call Lightning's takes: the same positional parameters in
  the same order, the same keywords, the same defaults (ddpkit may add parameters that have
  defaults, or take ``*args`` / ``**kwargs`` where Lightning names them);
- a property or attribute can be read, and set where Lightning's can.
"""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any, NamedTuple

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


class Param(NamedTuple):
    """One parameter of a signature: name, kind (``positional``, ``keyword-only``, ``*args``,
    ``**kwargs``) and default (its repr, or None when it has none)."""

    name: str
    kind: str
    default: str | None


def parameters(facts: list[dict[str, str]]) -> list[Param]:
    """The facts file's parameters of a signature (``self`` / ``cls`` dropped)."""
    kinds = {"positional-only": "positional"}
    return [
        Param(p["name"], kinds.get(p["kind"], p["kind"]), p.get("default"))
        for p in facts
        if p["name"] not in ("self", "cls")
    ]


def _ours(fn: Any) -> list[Param]:
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: "positional",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
        inspect.Parameter.KEYWORD_ONLY: "keyword-only",
        inspect.Parameter.VAR_POSITIONAL: "*args",
        inspect.Parameter.VAR_KEYWORD: "**kwargs",
    }
    return [
        Param(p.name, kinds[p.kind], None if p.default is p.empty else _repr(p.default))
        for p in inspect.signature(fn).parameters.values()
        if p.name not in ("self", "cls")
    ]


def _repr(value: Any) -> str:
    """A default as the facts spell it: an enum member by its value (Lightning's Timer takes
    ``interval=Interval.step``, a str enum, where ddpkit takes ``"step"``), a function by its
    name (``<function multiplicative>``)."""
    shown = repr(getattr(value, "value", value)) if hasattr(value, "_value_") else repr(value)
    return _ADDRESS.sub("", shown)


def _same_default(theirs: str, ours: str) -> bool:
    if theirs == ours:
        return True
    try:
        return bool(ast.literal_eval(theirs) == ast.literal_eval(ours))
    except (ValueError, SyntaxError):  # "<Interval.step: 'step'>": a str enum, by its value
        return theirs.endswith(f": {ours}>")


def incompatible(
    theirs: list[dict[str, str]], fn: Any, excused: frozenset[str] = frozenset()
) -> str | None:
    """Why a call that Lightning's ``theirs`` takes fails on ``fn`` (or gets another default;
    ``excused``: parameters whose defaults differ but mean the same); None when every such
    call works alike."""
    mine = _ours(fn)
    var_pos = any(p.kind == "*args" for p in mine)
    var_kw = any(p.kind == "**kwargs" for p in mine)
    positional = [p.name for p in mine if p.kind == "positional"]
    by_name = {p.name: p for p in mine}
    for index, param in enumerate(parameters(theirs)):
        if param.kind in ("*args", "**kwargs"):
            if not (var_pos if param.kind == "*args" else var_kw):
                return f"takes no {param.kind[:-1]}{param.name}"
            continue
        if param.kind == "positional" and index < len(positional):
            if positional[index] != param.name:
                return f"parameter {index + 1} is {positional[index]!r}, not {param.name!r}"
        elif param.kind == "positional" and not var_pos:
            return f"takes no parameter {index + 1} ({param.name!r})"
        ours = by_name.get(param.name)
        if ours is None:
            if not var_kw:
                return f"takes no {param.name!r}"
            continue
        if param.default is not None and ours.default is None:
            return f"{param.name!r} has no default (Lightning's: {param.default})"
        if param.name in excused:
            continue
        if param.default is not None and not _same_default(param.default, str(ours.default)):
            return f"{param.name}={ours.default}, Lightning's {param.name}={param.default}"
    required = [p.name for p in mine if p.default is None and p.kind in ("positional",
                "keyword-only") and p.name not in {q.name for q in parameters(theirs)}]  # fmt: skip
    return f"also requires {required}" if required else None


def defaults_differ(theirs: str | None, ours: Any) -> bool:
    """Lightning's default (repr, None: required) and ddpkit's parameter default differ."""
    if theirs is None:
        return ours is not inspect.Parameter.empty
    return ours is inspect.Parameter.empty or not _same_default(theirs, _repr(ours))


def unsettable(cls: type, instance: Any, name: str) -> bool:
    """ddpkit's member ``name`` is a property without a setter (Lightning's can be set)."""
    raw = inspect.getattr_static(cls, name, None)
    if isinstance(raw, property):
        return raw.fset is None
    return raw is None and instance is not None and name not in vars(instance)
