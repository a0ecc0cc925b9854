"""The shape of the code, held by a test: an import graph of ``src/ddpkit`` with no circle (not
even under ``TYPE_CHECKING``), no arrow from a lower layer to a higher one, and the two front-ends
apart (each reaches the runtime through its port, never the other's loop). The size budgets are
in test_budgets.py.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from source_tree import MODULES

#: Lowest first. A module may import from its own layer and the layers below it.
LAYERS: list[tuple[str, ...]] = [
    (
        "ddpkit.__about__",
        "ddpkit._compat_1x",
        "ddpkit._lightning_surface",
        "ddpkit.errors",
        "ddpkit._flag_names",
        "ddpkit._tracebacks",
        "ddpkit.utilities",
    ),
    ("ddpkit._runtime.ranks", "ddpkit._runtime"),
    ("ddpkit.accelerators", "ddpkit.plugins"),
    ("ddpkit._runtime.launch",),
    ("ddpkit.connector",),
    ("ddpkit.core", "ddpkit.callbacks", "ddpkit.loggers"),
    ("ddpkit.trainer",),
    ("ddpkit.lightning", "ddpkit.testing"),
    ("ddpkit.cli", "ddpkit.__main__", "ddpkit"),
]


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


#: ddpkit's own loop and what it alone runs, and Lightning's front-end: neither imports the other.
_OWN_LOOP = ("ddpkit.trainer", "ddpkit.core", "ddpkit.callbacks")
_LIGHTNING = ("ddpkit.lightning",)


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize(("mine", "theirs"), [(_LIGHTNING, _OWN_LOOP), (_OWN_LOOP, _LIGHTNING)])
def test_the_front_ends_do_not_import_each_other(
    mine: tuple[str, ...], theirs: tuple[str, ...]
) -> None:
    crossing = [
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if _under(module, mine)
        for target in sorted(targets)
        if _under(target, theirs)
    ]
    assert not crossing, (
        "a front-end imports the other (go through ddpkit._runtime):\n" + "\n".join(crossing)
    )


def test_lightnings_private_names_are_imported_in_one_module() -> None:
    """Every private name of Lightning ddpkit imports, it imports in
    ``ddpkit.lightning._lightning_private`` (where each says why)."""
    home = "ddpkit.lightning._lightning_private"
    found = []
    for module, path in MODULES.items():
        if module == home:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] not in ("pytorch_lightning", "lightning_fabric"):
                continue
            private = [a.name for a in node.names if a.name.startswith("_")]
            if private:
                found.append(f"{module} (line {node.lineno}): {node.module}: {private}")
    assert not found, f"import these from {home}:\n" + "\n".join(found)


#: The faces: every module a user may import by name. The rest is internal: its name starts with
#: ``_`` (or it sits in a private package) and it has no ``__all__`` (docs/architecture.md).
FACES = frozenset(
    {
        "ddpkit",
        "ddpkit.__about__",
        "ddpkit.__main__",
        "ddpkit.accelerators",
        "ddpkit.callbacks",
        "ddpkit.cli",
        "ddpkit.connector",
        "ddpkit.core",
        "ddpkit.errors",
        "ddpkit.lightning",
        "ddpkit.lightning.__main__",  # python -m ddpkit.lightning train.py
        "ddpkit.loggers",
        "ddpkit.plugins",
        "ddpkit.plugins.environments",
        "ddpkit.plugins.precision",
        "ddpkit.plugins.training_type",
        # Lightning 1.x's module paths of the three training types, kept for its users
        "ddpkit.plugins.training_type.ddp",
        "ddpkit.plugins.training_type.ddp_spawn",
        "ddpkit.plugins.training_type.single_device",
        "ddpkit.testing",
        # the pytest plugin's entry points (pyproject.toml, `-p ddpkit.testing.pytest_plugin`)
        "ddpkit.testing.marker_check",
        "ddpkit.testing.pytest_plugin",
        "ddpkit.trainer",
        "ddpkit.utilities",
    }
)


def _is_private(module: str) -> bool:
    return any(
        part.startswith("_") and part not in ("__about__", "__main__") for part in module.split(".")
    )


def test_the_public_modules_are_the_faces() -> None:
    public = {m for m in MODULES if not _is_private(m)}
    assert public == FACES, (
        f"public but not a face: {sorted(public - FACES)}; a face that is gone: "
        f"{sorted(FACES - public)}. Name an internal module _name.py, or add a face here "
        "and to docs/architecture.md"
    )


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _is_private(m)))
def test_an_internal_module_exports_nothing(module: str) -> None:
    """``__all__`` is the faces' word; internal modules import each name from its home. The
    exceptions are re-export modules by purpose: the Lightning private names, the 1.x mirror's
    and the surface tables' packages."""
    if module in (
        "ddpkit.lightning._lightning_private",
        "ddpkit.lightning._metrics",
        "ddpkit.lightning._surface",
        "ddpkit._lightning_surface",
        "ddpkit._runtime.launch",
    ):
        return
    tree = ast.parse(MODULES[module].read_text())
    names = {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    assert "__all__" not in names, f"{module} is internal: drop its __all__"


def test_the_pytest_plugin_reaches_the_warm_start_through_its_entry_module() -> None:
    plugin = "ddpkit.testing.pytest_plugin"
    warm = {t for t, _ in _imports(plugin, MODULES[plugin]) if t.startswith("ddpkit.testing._warm")}
    assert warm == {"ddpkit.testing._warm_start"}, warm
