"""Extract the public surface of the installed Lightning 2.x into a JSON fact file.

Reads, from the installed ``pytorch_lightning``, ``Trainer``, ``LightningModule`` (its hook mixins
and ``HyperparametersMixin`` included), ``LightningDataModule``, ``Callback``, every class
``pytorch_lightning.callbacks`` exports and every class ``pytorch_lightning.loggers`` exports:
each one's constructor keywords with their defaults, and every public member — methods (with
their signatures), properties, class attributes, and the attributes its methods set
(``self.X = ...``; for the Trainer also ``trainer.X = ...`` anywhere in the package). Writes
``src/ddpkit/_lightning_surface/facts_2x.json``; ``scripts/lightning_2x_table.py`` builds the
table of ddpkit's counterparts from it.

A class lists the members it adds to the classes of the list it derives from (a callback lists
what it adds to ``Callback``, ``RichModelSummary`` what it adds to ``ModelSummary``); the
members ``LightningModule`` inherits from ``torch.nn.Module`` are left out (ddpkit's ``Module``
is an ``nn.Module`` too). Run from the repository root, with the test set-up's .venv::

    .venv/bin/python scripts/lightning_2x_surface.py [--out PATH]
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "src/ddpkit/_lightning_surface/facts_2x.json"
PACKAGES = ("pytorch_lightning", "lightning_fabric", "lightning_utilities")
#: The classes read besides what pytorch_lightning.callbacks and .loggers export.
CORE = ("Trainer", "LightningModule", "LightningDataModule")


def classes() -> dict[str, tuple[type, str]]:
    """owner name → (the class, the module a user imports it from)."""
    import pytorch_lightning as pl
    from pytorch_lightning import callbacks, loggers

    found = {name: (getattr(pl, name), "pytorch_lightning") for name in CORE}
    for module in (callbacks, loggers):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type):
                found[name] = (value, module.__name__)
    return found


def is_lightning(cls: type) -> bool:
    return cls.__module__.split(".")[0] in PACKAGES


def path_of(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def stripped(fn: Any) -> inspect.Signature:
    """The signature without annotations (and without ``self``)."""
    sig = inspect.signature(fn)
    params = [p.replace(annotation=p.empty) for p in sig.parameters.values()]
    return sig.replace(parameters=params, return_annotation=sig.empty)


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional-only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword-only",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def parameters(sig: inspect.Signature) -> list[dict[str, str]]:
    """Each parameter's name, kind and default (its repr; absent when it has none)."""
    out = []
    for param in sig.parameters.values():
        entry = {"name": param.name, "kind": _KINDS[param.kind]}
        if param.default is not param.empty:
            entry["default"] = _ADDRESS.sub("", repr(param.default))  # the same each run
        out.append(entry)
    return out


def keywords(cls: type, owner_bases: list[type]) -> list[dict[str, str]] | None:
    """The constructor's parameters, or None when the class takes its base's (or object's)."""
    init = cls.__init__  # type: ignore[misc]
    if init is object.__init__ or any(init is b.__init__ for b in owner_bases):  # type: ignore[misc]
        return None
    return parameters(stripped(init))[1:]


def self_attributes(tree: ast.AST, owners: tuple[str, ...] = ("self",)) -> Iterator[str]:
    """Public X assigned as ``<owner>.X = ...`` (annotated, augmented, tuple targets too)."""
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [e for t in node.targets for e in getattr(t, "elts", [t])]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and ast.unparse(target.value) in owners
                and not target.attr.startswith("_")
            ):
                yield target.attr


def instance_attributes(cls: type) -> set[str]:
    """What the methods of the class's Lightning bases assign to ``self`` (not what a class or
    function nested in a method assigns to its own ``self``)."""
    found: set[str] = set()
    for base in cls.__mro__:
        if not is_lightning(base):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(base))).body[0]
        assert isinstance(tree, ast.ClassDef)
        for fn in tree.body:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for stmt in fn.body:
                    found.update(self_attributes(_without_nested(stmt)))
    return found


def _without_nested(node: ast.stmt) -> ast.AST:
    """The statement with the bodies of nested classes and functions emptied."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            sub.body = [] if not isinstance(sub, ast.Lambda) else sub.body  # type: ignore[assignment]
    return node


def trainer_attributes() -> set[str]:
    """``trainer.X = ...`` anywhere in pytorch_lightning (its connectors and loops set many)."""
    import pytorch_lightning

    root = Path(pytorch_lightning.__file__).parent
    found: set[str] = set()
    for source in sorted(root.rglob("*.py")):
        tree = ast.parse(source.read_text())
        found.update(self_attributes(tree, ("trainer", "self.trainer", "self._trainer")))
    return found


def member(cls: type, name: str) -> dict[str, Any]:
    """One member's kind, signature and defining class."""
    owner = next(c for c in cls.__mro__ if name in vars(c))
    raw = inspect.getattr_static(cls, name)
    entry: dict[str, Any] = {"defined_in": path_of(owner)}
    if isinstance(raw, property):
        entry["kind"] = "property"
        if raw.fset is not None:
            entry["settable"] = True
        return entry
    if isinstance(raw, staticmethod | classmethod) or hasattr(raw, "__func__"):
        # Lightning's load_from_checkpoint is a classmethod subclass (_restricted_classmethod)
        entry["kind"] = "staticmethod" if isinstance(raw, staticmethod) else "classmethod"
        sig = stripped(getattr(cls, name))
        first = next(iter(sig.parameters), None)
        if first == "cls":  # a classmethod-like descriptor Lightning wraps (not bound here)
            sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    elif inspect.isfunction(raw):
        entry["kind"] = "method"
        sig = stripped(raw)
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    else:
        entry["kind"] = "class" if isinstance(raw, type) else "attribute"
        if isinstance(raw, bool | int | float | str) or raw is None:
            entry["value"] = repr(raw)
        return entry
    entry["signature"] = str(sig)
    entry["parameters"] = parameters(sig)
    return entry


def public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def describe(name: str, cls: type, exported: str, owners: dict[str, type]) -> dict[str, Any]:
    import torch

    bases = [b for b in cls.__mro__[1:] if b in owners.values() and b is not cls]
    inherited = set().union(*(public(b) | instance_attributes(b) for b in bases))
    if name == "LightningModule":
        inherited |= public(torch.nn.Module)
    members = {n: member(cls, n) for n in sorted(public(cls) - inherited)}
    attributes = instance_attributes(cls) | (trainer_attributes() if name == "Trainer" else set())
    for attr in sorted(attributes - inherited - set(members)):
        members[attr] = {"kind": "attribute", "defined_in": "set by its methods"}
    out: dict[str, Any] = {
        "path": path_of(cls),
        "exported": exported,
        "bases": [n for n, c in owners.items() if c in bases],
        "members": members,
    }
    if inspect.isabstract(cls):
        out["abstract"] = True
    found = keywords(cls, bases)
    if found is not None:
        out["keywords"] = found
    return out


def extract() -> dict[str, Any]:
    import pytorch_lightning as pl

    found = classes()
    owners = {name: cls for name, (cls, _) in found.items()}
    return {
        "lightning": pl.__version__,  # type: ignore[attr-defined]
        "source": (
            "The installed pytorch_lightning, read with inspect (members, signatures) and ast "
            "(attributes set by methods): scripts/lightning_2x_surface.py."
        ),
        "classes": {
            name: describe(name, cls, exported, owners)
            for name, (cls, exported) in sorted(found.items())
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the Lightning 2.x surface facts (JSON).")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file to write")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        facts = extract()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(facts, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    counts = {name: len(info["members"]) for name, info in facts["classes"].items()}
    print(f"wrote {args.out}: Lightning {facts['lightning']}, {len(counts)} classes, "
          f"{sum(counts.values())} members")  # fmt: skip


if __name__ == "__main__":
    main()
