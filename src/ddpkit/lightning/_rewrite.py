"""The porting rule applied as a project is imported: each ``pytorch_lightning`` import of the
project's own code becomes the same import of ``ddpkit.lightning`` (what
``python -m ddpkit.lightning`` runs a 1.x script with, unchanged on disk).

:func:`port_source` rewrites the imports of one module's source (``import pytorch_lightning as
pl`` → ``import ddpkit.lightning as pl``; ``from pytorch_lightning.callbacks import X`` → ``from
ddpkit.lightning.callbacks import X``; ``import pytorch_lightning.x`` binds ``pytorch_lightning``
to ``ddpkit.lightning``). Other uses of the name — a string such as
``logging.getLogger("pytorch_lightning")`` — keep meaning Lightning's own.

:class:`ProjectFinder`, first on ``sys.meta_path``, ports every module of the project as it is
imported: a source file outside the installed packages (site-packages, the standard library,
ddpkit) that mentions ``pytorch_lightning``. Lightning 2.x's own modules, and every installed
package, import Lightning's own ``pytorch_lightning`` as before.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import os
import sys
import sysconfig
import types
from collections.abc import Sequence
from pathlib import Path

_OLD, _NEW = "pytorch_lightning", "ddpkit.lightning"
#: What ``python -m ddpkit.lightning`` runs, for :mod:`ddpkit.lightning._script` in every rank.
SCRIPT_ENV, MODULE_ENV = "DDPKIT_LIGHTNING_SCRIPT", "DDPKIT_LIGHTNING_MODULE"


def _ported(name: str) -> str | None:
    if name == _OLD or name.startswith(_OLD + "."):
        return _NEW + name[len(_OLD) :]
    return None


class _PortImports(ast.NodeTransformer):
    def visit_Import(self, node: ast.Import) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        kept: list[ast.alias] = []
        for alias in node.names:
            new = _ported(alias.name)
            if new is None:
                kept.append(alias)
            elif alias.asname is not None or alias.name == _OLD:
                out.append(ast.Import(names=[ast.alias(new, alias.asname or _OLD)]))
            else:  # `import pytorch_lightning.x` imports x and binds `pytorch_lightning`
                out.append(ast.Import(names=[ast.alias(new, "_ddpkit_ported_import")]))
                out.append(ast.Import(names=[ast.alias(_NEW, _OLD)]))
        if kept:
            out.insert(0, ast.Import(names=kept))
        return [ast.copy_location(statement, node) for statement in out]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        new = _ported(node.module or "") if node.level == 0 else None
        if new is not None:
            node.module = new
        return node


def port_source(source: str | bytes, filename: str = "<string>") -> types.CodeType:
    """The code of ``source`` with its ``pytorch_lightning`` imports ported."""
    tree = _PortImports().visit(ast.parse(source, filename))
    ast.fix_missing_locations(tree)
    code: types.CodeType = compile(tree, filename, "exec", dont_inherit=True)
    return code


def _installed_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.add(str(Path(__file__).resolve().parents[1]))  # ddpkit itself
    return tuple(os.path.realpath(root) + os.sep for root in roots)


_ROOTS = _installed_roots()


def is_project_file(path: str) -> bool:
    """A source file of the user's project: outside the installed packages, mentioning
    ``pytorch_lightning``."""
    real = os.path.realpath(path)
    if not real.endswith(".py") or real.startswith(_ROOTS) or "site-packages" in real:
        return False
    try:
        return _OLD.encode() in Path(real).read_bytes()
    except OSError:
        return False


class _PortingLoader(importlib.machinery.SourceFileLoader):
    """Compiles the ported source; never from (or to) a bytecode cache, which would hold the
    unported code."""

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return port_source(self.get_data(path), path)


class ProjectFinder(importlib.abc.MetaPathFinder):
    """Finds the project's modules with the path finder and loads them ported."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if (
            spec is None
            or spec.origin is None
            or not isinstance(spec.loader, importlib.machinery.SourceFileLoader)
        ):
            return None
        if not is_project_file(spec.origin):
            return None
        spec.loader = _PortingLoader(fullname, spec.origin)
        return spec


def install() -> None:
    """Put :class:`ProjectFinder` first on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(finder, ProjectFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, ProjectFinder())
