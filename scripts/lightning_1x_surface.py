"""Extract the public surface of Lightning's released 1.x wheels into a JSON fact file.

Reads the wheels of pytorch_lightning 1.0.8 ... 1.9.5 (last patch of each minor) with zipfile and
parses them with ast; nothing is imported. Writes ``src/ddpkit/lightning/_surface/facts_1x.json``:
each public ``pytorch_lightning.*`` module's names (``__all__``, else its definitions plus
re-exports from inside the wheel, which includes the bundled lightning_lite / lightning_fabric),
and every public member of Trainer, LightningModule, LightningDataModule and Callback (own or from
bases inside the wheel; Trainer also ``trainer.X = ...`` set elsewhere), each with its releases.

Run from the repository root (missing wheels are fetched into the cache with ``pip download``)::

    python scripts/lightning_1x_surface.py [--cache DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

VERSIONS = {f"1.{i}": full for i, full in enumerate(
    ["1.0.8", "1.1.8", "1.2.10", "1.3.8", "1.4.9", "1.5.10", "1.6.5", "1.7.7", "1.8.6", "1.9.5"]
)}  # fmt: skip
ROOT = "pytorch_lightning"
BUNDLED = frozenset({ROOT, "lightning_lite", "lightning_fabric"})
SKIP_SEGMENTS = frozenset({"tests", "benchmarks", "setup_tools"})
CLASSES = {  # class name -> modules that define it, newest location first
    "Trainer": ["pytorch_lightning.trainer.trainer"],
    "LightningModule": ["pytorch_lightning.core.module", "pytorch_lightning.core.lightning"],
    "LightningDataModule": ["pytorch_lightning.core.datamodule"],
    "Callback": ["pytorch_lightning.callbacks.callback", "pytorch_lightning.callbacks.base"],
}
PROPERTY_DECORATORS = frozenset({"property", "cached_property", "abstractproperty"})
REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "src/ddpkit/lightning/_surface/facts_1x.json"
DEFAULT_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ddpkit/lightning-wheels"
)
SOURCE = (
    f"The PyPI wheels of pytorch_lightning {', '.join(VERSIONS.values())}, read with zipfile and "
    "ast (never imported)."
)
T = TypeVar("T")
Fact = tuple[str, str | None, str | None, str | None]  # kind, signature, defined in, set by


class Binding(NamedTuple):  # kind: class / function / constant / from (-import) / import
    kind: str
    node: ast.AST | None = None
    module: str = ""
    name: str = ""


@dataclass
class Module:
    name: str
    tree: ast.Module
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    all: list[str] | None = None
    star: list[str] = field(default_factory=list)


class ClassRef(NamedTuple):
    path: str  # dotted module path + "." + class name
    module: str
    node: ast.ClassDef


def in_wheel(module: str) -> bool:
    return module.split(".")[0] in BUNDLED


def is_public(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == ROOT and not any(p[0] == "_" or p in SKIP_SEGMENTS for p in parts[1:])


def statements(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements run at module/class level, looking inside if/try (not TYPE_CHECKING)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            if "__name__" in test:
                continue
            if not test.endswith("TYPE_CHECKING"):  # typing-only imports are never bound
                yield from statements(stmt.body)
            yield from statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                yield from statements(part)
        else:
            yield stmt


def literal_strings(node: ast.expr) -> list[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [str(e.value) for e in node.elts if isinstance(e, ast.Constant)]
    raise ValueError(f"non-literal __all__: {ast.unparse(node)}")


def assigned(stmt: ast.AST) -> list[ast.expr]:
    """The targets of an assignment, tuples flattened; [] for any other node."""
    if isinstance(stmt, ast.Assign):
        return [e for t in stmt.targets for e in getattr(t, "elts", [t])]
    return [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []


def bind(mod: Module, stmt: ast.stmt) -> None:
    def add(name: str, binding: Binding) -> None:
        mod.bindings.setdefault(name, []).append(binding)

    if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        add(stmt.name, Binding("class" if isinstance(stmt, ast.ClassDef) else "function", stmt))
    elif isinstance(stmt, ast.AugAssign) and ast.unparse(stmt.target) == "__all__":
        mod.all = (mod.all or []) + literal_strings(stmt.value)
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        for name in (t.id for t in assigned(stmt) if isinstance(t, ast.Name)):
            if name == "__all__":
                mod.all = literal_strings(stmt.value)
            else:
                add(name, Binding("constant", stmt))
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func, args = ast.unparse(stmt.value.func), stmt.value.args
        if func == "__all__.append" and isinstance(args[0], ast.Constant):
            mod.all = [*(mod.all or []), str(args[0].value)]
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            bound = alias.name if alias.asname else alias.name.split(".")[0]
            add(alias.asname or bound, Binding("import", module=bound))
    elif isinstance(stmt, ast.ImportFrom):
        if stmt.level:  # 1.x has none; resolving them would need the importer's package
            raise ValueError(f"relative import in {mod.name}")
        source = stmt.module or ""
        for alias in stmt.names:
            if alias.name == "*":
                mod.star.append(source)
            else:
                add(alias.asname or alias.name, Binding("from", module=source, name=alias.name))


class Wheel:
    """The parsed sources of one wheel's bundled packages."""

    def __init__(self, path: Path) -> None:
        self.modules: dict[str, Module] = {}
        with zipfile.ZipFile(path) as archive:
            for entry in sorted(archive.namelist()):
                if not entry.endswith(".py") or entry.split("/")[0] not in BUNDLED:
                    continue
                name = entry.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
                mod = self.modules[name] = Module(name, ast.parse(archive.read(entry)))
                for stmt in statements(mod.tree.body):
                    bind(mod, stmt)

    def kind_of(self, mod: Module, name: str) -> str | None:
        """The kind of a top-level name; None where only outside-the-wheel imports bind it."""
        for binding in mod.bindings.get(name, []):
            if binding.kind in ("class", "function", "constant"):
                return binding.kind
            if binding.kind == "from" and in_wheel(binding.module):
                submodule = f"{binding.module}.{binding.name}"
                return "module" if submodule in self.modules else "alias"
        return None

    def names(self, mod: Module, seen: frozenset[str] = frozenset()) -> dict[str, str]:
        """A module's public names and their kinds."""
        if mod.all is not None:
            return {n: self.kind_of(mod, n) or "unbound" for n in mod.all}
        names: dict[str, str] = {}
        for source in mod.star:
            if source in self.modules and source not in seen:
                star = self.names(self.modules[source], seen | {mod.name})
                names.update(dict.fromkeys(star, "alias"))
        public = (name for name in mod.bindings if not name.startswith("_"))
        return names | {n: kind for n in public if (kind := self.kind_of(mod, n)) is not None}

    def resolve(self, module: str, name: str, depth: int = 0) -> ClassRef | str | None:
        """A class (ClassRef) or a module (its name) bound to module.name; None outside."""
        mod = self.modules.get(module)
        if mod is None or depth > 30:
            return None
        for binding in mod.bindings.get(name, []):
            if isinstance(binding.node, ast.ClassDef):
                return ClassRef(f"{module}.{name}", module, binding.node)
            if binding.kind == "from" and in_wheel(binding.module):
                return self.resolve(binding.module, binding.name, depth + 1)
            if binding.kind == "import" and in_wheel(binding.module):
                return binding.module
        starred = (self.resolve(source, name, depth + 1) for source in mod.star)
        found = next((ref for ref in starred if ref is not None), None)
        return found or (f"{module}.{name}" if f"{module}.{name}" in self.modules else None)

    def resolve_expr(self, module: str, expr: ast.expr) -> ClassRef | str | None:
        if isinstance(expr, ast.Name):
            return self.resolve(module, expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.resolve_expr(module, expr.value)
            return self.resolve(base, expr.attr) if isinstance(base, str) else None
        return None

    def mro(self, cls: ClassRef) -> list[ClassRef]:
        """C3 linearisation over the bases defined inside the wheel."""
        bases = [self.resolve_expr(cls.module, b) for b in cls.node.bases]
        direct = [b for b in bases if isinstance(b, ClassRef)]
        seqs = [self.mro(b) for b in direct] + [direct]
        out = [cls]
        while seqs := [s for s in seqs if s]:
            head = next((s[0] for s in seqs if not any(s[0] in t[1:] for t in seqs)), None)
            if head is None:
                raise ValueError(f"inconsistent MRO for {cls.path}")
            out.append(head)
            seqs = [s[1:] if s[0] == head else s for s in seqs]
        return out


def method_kind(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    for decorator in fn.decorator_list:
        name = ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
        if name in ("staticmethod", "classmethod"):
            return name
        if name.split(".")[-1] in PROPERTY_DECORATORS or name.endswith((".setter", ".deleter")):
            return "property"
    return "method"


def signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    args = copy.deepcopy(fn.args)
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if arg is not None:
            arg.annotation = None
    return f"({ast.unparse(args)})"


def self_attributes(fn: ast.AST, owners: tuple[str, ...] = ("self",)) -> Iterator[str]:
    """Public X assigned as ``<owner>.X = ...`` (also annotated, augmented, tuple targets)."""
    for sub in ast.walk(fn):
        for t in assigned(sub):
            if isinstance(t, ast.Attribute) and ast.unparse(t.value) in owners and t.attr[0] != "_":
                yield t.attr


def class_members(node: ast.ClassDef) -> dict[str, tuple[str, str | None]]:
    """name -> (kind, signature) for what one class body defines (own body only)."""
    attributes: dict[str, tuple[str, str | None]] = {}  # self.X = ... in any method
    found: dict[str, tuple[str, str | None]] = {}
    for stmt in statements(node.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            attributes.update(dict.fromkeys(self_attributes(stmt), ("attribute", None)))
            kind = method_kind(stmt)
            found[stmt.name] = (kind, None if kind == "property" else signature(stmt))
        else:
            found.update(
                (t.id, ("attribute", None)) for t in assigned(stmt) if isinstance(t, ast.Name)
            )
    found = attributes | found
    return {k: v for k, v in found.items() if k == "__init__" or not k.startswith("_")}


def collect_class(wheel: Wheel, name: str) -> tuple[str, dict[str, Fact]]:
    for module in CLASSES[name]:
        if isinstance(ref := wheel.resolve(module, name), ClassRef) and ref.module == module:
            break
    else:
        raise SystemExit(f"{name} is not defined in any of {CLASSES[name]}")
    members: dict[str, Fact] = {}
    for cls in wheel.mro(ref):
        for member, (kind, sig) in class_members(cls.node).items():
            members.setdefault(member, (kind, sig, cls.path, None))
    for mod in wheel.modules.values() if name == "Trainer" else ():
        if mod.name.split(".")[0] == ROOT:  # 1.x sets many Trainer attributes from its connectors
            for attr in self_attributes(mod.tree, ("trainer", "self.trainer")):
                members.setdefault(attr, ("attribute", None, ref.path, mod.name))
    return ref.path, members


def changes(per_version: dict[str, T]) -> dict[str, T]:
    """Keep a value only in the versions where it differs from the previous one present."""
    out: dict[str, T] = {}
    for version in sorted(per_version):
        if not out or per_version[version] != out[max(out)]:
            out[version] = per_version[version]
    return out


def entry(facts: dict[str, Fact]) -> dict[str, Any]:
    """One name across releases: its kind, releases, and what changed between them."""
    kinds = {v: f[0] for v, f in facts.items()}
    last = facts[max(facts)]
    out = {
        "kind": last[0],
        "versions": sorted(facts),
        "defined_in": last[2],
        "set_by": last[3],
        "signature": changes({v: f[1] for v, f in facts.items() if f[1] is not None}),
        "kinds": changes(kinds) if len(set(kinds.values())) > 1 else None,
    }
    return {key: value for key, value in out.items() if value}


def ensure_wheel(cache: Path, full: str) -> Path:
    pattern = f"pytorch_lightning-{full}-*.whl"
    if not any(cache.glob(pattern)):
        cache.mkdir(parents=True, exist_ok=True)
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        subprocess.run([*pip, "-d", str(cache), f"pytorch-lightning=={full}"], check=True)
    return sorted(cache.glob(pattern))[0]


def extract(cache: Path) -> dict[str, Any]:
    names: dict[str, dict[str, dict[str, Fact]]] = {}  # module -> name -> version -> fact
    shipped: dict[str, list[str]] = {}  # module -> versions
    paths: dict[str, dict[str, str]] = {name: {} for name in CLASSES}
    members: dict[str, dict[str, dict[str, Fact]]] = {name: {} for name in CLASSES}
    for short, full in VERSIONS.items():
        wheel = Wheel(ensure_wheel(cache, full))
        for module in filter(is_public, wheel.modules):
            shipped.setdefault(module, []).append(short)
            for name, kind in wheel.names(wheel.modules[module]).items():
                names.setdefault(module, {}).setdefault(name, {})[short] = (kind, None, None, None)
        for cls in CLASSES:
            paths[cls][short], found = collect_class(wheel, cls)
            for member, fact in found.items():
                members[cls].setdefault(member, {})[short] = fact
    modules = {
        module: {
            "versions": versions,
            "names": {n: entry(f) for n, f in names.get(module, {}).items()},
        }
        for module, versions in shipped.items()
    }
    classes = {
        cls: {
            "path": paths[cls][max(paths[cls])],
            **({"paths": changes(paths[cls])} if len(set(paths[cls].values())) > 1 else {}),
            "members": {member: entry(facts) for member, facts in members[cls].items()},
        }
        for cls in CLASSES
    }
    return {"source": SOURCE, "versions": VERSIONS, "modules": modules, "classes": classes}


def summarize(facts: dict[str, Any]) -> None:
    modules, classes = facts["modules"], facts["classes"]
    header = ["version", "modules", "names", *classes]
    print(*header)
    for v in VERSIONS:
        mods = [m for m in modules.values() if v in m["versions"]]
        row = [v, len(mods), sum(v in n["versions"] for m in mods for n in m["names"].values())]
        row += [sum(v in m["versions"] for m in c["members"].values()) for c in classes.values()]
        print(*(f"{cell:>{len(h)}}" for cell, h in zip(row, header)))
    for label, fact in [
        ("module pytorch_lightning.metrics", modules.get("pytorch_lightning.metrics")),
        ("module ...core.lightning", modules.get("pytorch_lightning.core.lightning")),
        ("utilities.DistributedType", modules[ROOT + ".utilities"]["names"].get("DistributedType")),
        ("LightningDataModule.size", classes["LightningDataModule"]["members"].get("size")),
        ("Trainer.add_argparse_args", classes["Trainer"]["members"].get("add_argparse_args")),
    ]:
        print(f"{label}: {(fact or {}).get('versions', 'absent')}")
    top = sorted(modules, key=lambda m: (-len(modules[m]["names"]), m))[:10]
    print("most names:", ", ".join(f"{m} ({len(modules[m]['names'])})" for m in top))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the Lightning 1.x surface facts (JSON).")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="wheel cache folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file to write")
    args = parser.parse_args(argv)
    facts = extract(args.cache)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    summarize(facts)


if __name__ == "__main__":
    main()
