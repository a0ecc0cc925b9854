"""The shape of the code, held by tests: size budgets (module ≤ 400 lines, class ≤ 250,
function ≤ 60, with a short reasoned list of exemptions) and an import graph of ``src/ddpkit``
with no circle (not even under ``TYPE_CHECKING``) and no arrow from a lower layer to a higher one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ddpkit"

MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 400, 250, 60

#: (qualified name, why it may be longer). Keep this short; every entry says why.
EXEMPT: dict[str, str] = {
    "ddpkit.trainer.training.FitLoop._batches": (
        "the per-step hot loop: one frame, locals and hook lists hoisted out of it"
    ),
}

#: Lowest first. A module may import from its own layer and the layers below it.
LAYERS: list[tuple[str, ...]] = [
    ("ddpkit.__about__", "ddpkit.errors", "ddpkit.utilities"),
    ("ddpkit.ranks",),
    ("ddpkit.accelerators", "ddpkit.plugins"),
    ("ddpkit.launchers",),
    ("ddpkit.connector",),
    ("ddpkit.core", "ddpkit.callbacks", "ddpkit.loggers"),
    ("ddpkit.trainer",),
    ("ddpkit.lightning", "ddpkit.testing"),
    ("ddpkit.cli", "ddpkit.__main__", "ddpkit"),
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _layer(module: str) -> int:
    best, best_len = -1, -1
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best < 0:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return best


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every ddpkit module ``module`` imports, anywhere in the file (TYPE_CHECKING too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ddpkit"):
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            if not base.startswith("ddpkit"):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if full in MODULES else base), node.lineno


def _resolve(name: str) -> str:
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


GRAPH = {m: {_resolve(t) for t, _ in _imports(m, p)} - {m} for m, p in MODULES.items()}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_goes_up_a_layer(module: str) -> None:
    mine = _layer(module)
    upward = [
        f"{target} (line {line})"
        for target, line in _imports(module, MODULES[module])
        if _layer(_resolve(target)) > mine
    ]
    assert not upward, f"{module} (layer {mine}) imports from a higher layer: {', '.join(upward)}"


def test_the_import_graph_has_no_circle() -> None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(GRAPH[node]):
            if state.get(target) == 1:
                cycle = [*stack[stack.index(target) :], target]
                raise AssertionError(f"import circle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)


def _sized(tree: ast.AST, prefix: str) -> Iterator[tuple[str, str, int]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}.{node.name}"
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield name, kind, (node.end_lineno or node.lineno) - start + 1
            yield from _sized(node, name)


def test_budgets() -> None:
    over = []
    for module, path in MODULES.items():
        lines = len(path.read_text().splitlines())
        if lines > MODULE_LINES and module not in EXEMPT:
            over.append(f"module {module}: {lines} lines > {MODULE_LINES}")
        for name, kind, size in _sized(ast.parse(path.read_text()), module):
            limit = CLASS_LINES if kind == "class" else FUNCTION_LINES
            if size > limit and name not in EXEMPT:
                over.append(f"{kind} {name}: {size} lines > {limit}")
    assert not over, "over budget:\n" + "\n".join(over)


def test_every_exemption_is_still_needed() -> None:
    sizes = {}
    for module, path in MODULES.items():
        sizes[module] = len(path.read_text().splitlines())
        for name, _, size in _sized(ast.parse(path.read_text()), module):
            sizes[name] = size
    stale = [name for name in EXEMPT if name not in sizes]
    assert not stale, f"exemptions for code that no longer exists: {stale}"
