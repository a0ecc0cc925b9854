"""Build the 1.x surface table (``surface_1x.json``) from the facts of the 1.x wheels, the rules
of :mod:`~ddpkit.lightning._surface.rules` and the installed Lightning 2.x.

Each 1.x module path and each 1.x name gets one status (see :mod:`ddpkit.lightning._surface`):

- a module: ``provided`` when ddpkit's module or the 2.x module it moved to stands there (or
  ddpkit provides one of its names), ``unchanged`` when 2.x has it, else its ``MODULE_RULES``;
- a name: ``provided`` when ddpkit provides it (``PROVIDED``); else its module's status when 2.x
  dropped the module; ``unchanged`` / ``provided`` when the module behind the path has it;
  else its ``NAME_RULES``; else ``provided`` when exactly one object of that name stands in
  Lightning 2.x's public modules (it moved); else, for a name the module imported from another
  1.x module, the status of the name where 1.x defined it.

An entry the rules leave without a status is an error that names it: the table is never written
with a gap. ``scripts/lightning_1x_surface.py table`` writes it; a test builds it again and
compares.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
import types
import warnings
from collections.abc import Iterator
from typing import Any

from ddpkit._lightning_surface.build import UnresolvedError
from ddpkit.lightning import _surface
from ddpkit.lightning._surface import members, refusals, rules

_PACKAGES = ("pytorch_lightning", "lightning_fabric", "lightning_utilities")
_PREFER = {name: rank for rank, name in enumerate(_PACKAGES)}


def _public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def _import(path: str) -> types.ModuleType | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(path)
    except Exception:  # an optional dependency of that module is missing: not there for us
        return None


@functools.cache
def _modules_2x() -> dict[str, types.ModuleType]:
    """Every public module of Lightning 2.x, Fabric and lightning_utilities that imports."""
    found: dict[str, types.ModuleType] = {}
    for package_name in _PACKAGES:
        package = _import(package_name)
        if package is None:
            continue
        found[package_name] = package
        for info in pkgutil.walk_packages(package.__path__, package_name + "."):
            if _public(info.name):
                module = _import(info.name)
                if module is not None:
                    found[info.name] = module
    # Lightning's graveyard puts removed paths in sys.modules; they are 2.x's as well.
    found.update({n: m for n, m in sys.modules.items() if n.startswith("pytorch_lightning.")})
    return found


@functools.cache
def _index() -> dict[str, dict[int, str]]:
    """name → {id of the object → its best public path}, over :func:`_modules_2x`."""
    index: dict[str, dict[int, str]] = {}
    for path, module in sorted(_modules_2x().items()):
        for name, value in list(vars(module).items()):
            if name.startswith("_") or isinstance(value, types.ModuleType):
                continue
            home = getattr(value, "__module__", None)
            if not (isinstance(home, str) and home.split(".")[0] in _PACKAGES):
                continue  # a name the module imported from torch, typing, ...
            seen = index.setdefault(name, {})
            best = seen.get(id(value))
            if best is None or _rank(path, home) < _rank(best.partition(":")[0], home):
                seen[id(value)] = f"{path}:{name}"
    return index


def _rank(path: str, home: str) -> tuple[bool, int, int, str]:
    """Where an object is best named: the module that defines it, else the first package of
    :data:`_PACKAGES`, then the shortest path."""
    return (path != home, _PREFER.get(path.split(".")[0], 9), path.count("."), path)


def _span(versions: list[str]) -> dict[str, str]:
    return {"since": versions[0], "until": versions[-1]}


def _module_rule(path: str) -> tuple[str, str] | None:
    best = max((p for p in refusals.MODULE_RULES if path == p or path.startswith(p + ".")),
               key=len, default=None)  # fmt: skip
    return None if best is None else refusals.MODULE_RULES[best]


def module_status(path: str) -> dict[str, str]:
    """The status of the 1.x module ``path`` (see the module docstring)."""
    if path in rules.PROVIDED_MODULES:
        return {"status": "provided", "target": rules.PROVIDED_MODULES[path],
                "note": "ddpkit.lightning's own, with 1.x's names"}  # fmt: skip
    served = _not_served(path)
    if served is not None:
        return {"status": served[0], "note": served[1]}
    if path in rules.MOVED_MODULES:
        moved = rules.MOVED_MODULES[path]
        return {"status": "provided", "target": moved, "note": f"Lightning 2.x's {moved}"}
    if path in _modules_2x():
        return {"status": "unchanged"}
    if any(name.startswith(path + ".") for name in rules.PROVIDED):
        rule = _module_rule(path)
        note = rule[1] if rule else ""
        return {"status": "provided", "note": "only the names ddpkit provides. " + note}
    rule = _module_rule(path)
    if rule is None:
        raise UnresolvedError(f"module {path}")
    return {"status": rule[0], "note": rule[1]}


def _not_served(path: str) -> tuple[str, str] | None:
    for prefix, rule in refusals.NOT_SERVED.items():
        if path == prefix or path.startswith(prefix + "."):
            return rule
    return None


def _behind(path: str) -> types.ModuleType | None:
    if _not_served(path) is not None:
        return None
    target = rules.PROVIDED_MODULES.get(path) or rules.MOVED_MODULES.get(path) or path
    return _modules_2x().get(target) or (_import(target) if target.startswith("ddpkit") else None)


def name_status(path: str, name: str, kind: str, facts: dict[str, Any]) -> dict[str, str]:
    """The status of the 1.x name ``path.name`` (see the module docstring)."""
    dotted = f"{path}.{name}"
    if dotted in rules.PROVIDED:
        return {"status": "provided", "target": rules.PROVIDED[dotted]}
    module = module_status(path)
    behind = _behind(path)
    if behind is None and module["status"] in (refusals.REFUSED, refusals.OUT):
        return {"status": module["status"], "note": module["note"]}
    if behind is not None and hasattr(behind, name):
        ours = _surface.substitute_target(getattr(behind, name))
        if ours is not None:
            return {"status": "provided", "target": ours}
        if module["status"] == "unchanged":
            return {"status": "unchanged"}
        return {"status": "provided", "target": f"{behind.__name__}:{name}"}
    rule = refusals.NAME_RULES.get(dotted) or refusals.NAME_RULES.get(name)
    if rule is not None:
        return {"status": rule[0], "note": rule[1]}
    moved = _index().get(name, {})
    if len(moved) == 1:
        return {"status": "provided", "target": next(iter(moved.values()))}
    if kind == "alias":
        for origin in _origins(name, facts):
            if origin != path:
                found = name_status(origin, name, "defined", facts)
                if found["status"] == "unchanged":  # here, it is the object at its origin
                    return {"status": "provided", "target": f"{origin}:{name}"}
                return found
    rule = _module_rule(path)
    if rule is not None:
        return {"status": rule[0], "note": rule[1]}
    raise UnresolvedError(f"name {dotted} ({kind}; {len(moved)} objects of that name in 2.x)")


def _origins(name: str, facts: dict[str, Any]) -> Iterator[str]:
    """The 1.x modules that defined ``name`` (not re-exported it), newest first."""
    found = [
        (info["names"][name]["versions"][-1], path)
        for path, info in facts["modules"].items()
        if info["names"].get(name, {}).get("kind", "alias") != "alias"
    ]
    yield from (path for _, path in sorted(found, reverse=True))


def build_table(facts: dict[str, Any]) -> dict[str, Any]:
    """The whole table; raises :class:`UnresolvedError` listing every entry without a status."""
    import pytorch_lightning

    version = pytorch_lightning.__version__  # type: ignore[attr-defined]
    out: dict[str, Any] = {"lightning": version, "modules": {}, "names": {}}
    missing: list[str] = []
    for path, info in sorted(facts["modules"].items()):
        try:
            entry = module_status(path)
        except UnresolvedError as err:
            missing.append(str(err))
            continue
        out["modules"][path] = {**_span(info["versions"]), **entry, "names": sorted(info["names"])}
        for name, fact in sorted(info["names"].items()):
            try:
                status = name_status(path, name, fact["kind"], facts)
            except UnresolvedError as err:
                missing.append(str(err))
                continue
            out["names"][f"{path}.{name}"] = {**_span(fact["versions"]), "kind": fact["kind"],
                                              **status}  # fmt: skip
    out["members"] = members.member_table(facts, missing)
    if missing:
        raise UnresolvedError(f"{len(missing)} 1.x entries have no status:\n" + "\n".join(missing))
    return out
