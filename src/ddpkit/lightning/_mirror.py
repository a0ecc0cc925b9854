"""The 1.x module tree under ``ddpkit.lightning``: one porting rule, ``pytorch_lightning`` →
``ddpkit.lightning``, for every import a 1.x project has.

``ddpkit.lightning.<path>`` exists for every public module path of Lightning 1.0–1.9 and of the
installed Lightning 2.x. Each such module is a :class:`MirrorModule`: Lightning 2.x's module at
the same path (or where 1.x's moved to: :data:`~ddpkit.lightning._surface.rules.MOVED_MODULES`),
with the 1.x names on top. A name is looked up in this order:

1. a 1.x name ddpkit provides with 1.x semantics (``Trainer``, ``LightningDataModule``,
   ``DDPPlugin``, 1.x's ``LightningCLI`` ...: :data:`~ddpkit.lightning._surface.rules.PROVIDED`);
2. Lightning 2.x's name at that path (everything unchanged since 1.x, and 2.x's own names);
3. the 1.x surface table: a name that moved elsewhere in 2.x is that object; a name 2.x removed
   raises :class:`~ddpkit.errors.LightningRemovedError` with the fix (or why ddpkit leaves it out);
4. a submodule of that path.

The modules are made by a finder on ``sys.meta_path`` that answers for ``ddpkit.lightning.*``
names only (never for a private ``_name``: ddpkit's own modules are real files), installed when
``ddpkit.lightning`` is imported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

from ddpkit.lightning import _surface

#: The package a mirror stands for, and the one it lives under.
LIGHTNING, PREFIX = "pytorch_lightning", "ddpkit.lightning"


def lightning_path(name: str) -> str:
    """``ddpkit.lightning._callbacks`` → ``pytorch_lightning.callbacks``."""
    return LIGHTNING + name[len(PREFIX) :]


def resolve(path: str, target: types.ModuleType | None, name: str) -> Any:
    """The object ``<path>.<name>`` of the 1.x surface means (see the module for the order)."""
    dotted = f"{path}.{name}"
    provided = _surface.provided(dotted)
    if provided is not None:
        return provided
    if target is not None:
        try:
            value = getattr(target, name)
        except AttributeError:
            pass
        else:
            if isinstance(value, types.ModuleType) and value.__name__.startswith(LIGHTNING + "."):
                return importlib.import_module(PREFIX + value.__name__[len(LIGHTNING) :])
            return _surface.substitute(value)
    entry = _surface.name_entry(dotted)
    if entry is not None:
        return _surface.honour(dotted, entry)
    if _surface.is_module(dotted):
        return importlib.import_module(PREFIX + dotted[len(LIGHTNING) :])
    raise AttributeError(
        f"module {PREFIX + path[len(LIGHTNING) :]!r} has no attribute {name!r}: neither "
        f"Lightning 1.x's {path} nor Lightning 2.x's has it"
    )


class MirrorModule(types.ModuleType):
    """``ddpkit.lightning.<path>``: Lightning 2.x's ``pytorch_lightning.<path>`` plus the 1.x
    names of that path (see the module)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        #: the Lightning path this module stands for
        self.__lightning_path__ = lightning_path(name)
        #: Lightning 2.x's module behind it (None: 2.x has none there)
        self.__lightning_module__: types.ModuleType | None = None
        self.__path__: list[str] = []  # a package: its submodules come from the finder too

    def bind(self) -> None:
        """Find the 2.x module behind this path; a 1.x module that nothing of stands in 2.x
        is refused here, at the import, with its fix."""
        path = self.__lightning_path__
        self.__lightning_module__ = _surface.target_module(path)
        self.__doc__ = (
            f"Lightning's {path} as a 1.x project knew it: Lightning 2.x's module"
            f"{' ' + self.__lightning_module__.__name__ if self.__lightning_module__ else ''}"
            f" plus the 1.x names (ddpkit.lightning._mirror)."
        )
        if self.__lightning_module__ is None and not _surface.has_names(path):
            entry = _surface.module_entry(path)
            if entry is not None:
                _surface.honour(path, entry)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = resolve(self.__lightning_path__, self.__lightning_module__, name)
        setattr(self, name, value)  # once found, a plain attribute: no lookup the next time
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        # The import system binds each imported submodule on its package. 1.x packages bound
        # some names twice, the function winning (metrics.functional.accuracy is the function
        # and a module): a submodule never hides what the name means at this path.
        if isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            entry = _surface.name_entry(f"{self.__lightning_path__}.{name}") or {}
            target = self.__dict__.get("__lightning_module__")
            static = vars(target).get(name) if target is not None else None
            if entry.get("kind", "module") != "module" or not isinstance(
                static, types.ModuleType | None
            ):
                return
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        names = set(super().__dir__())
        if self.__lightning_module__ is not None:
            names.update(dir(self.__lightning_module__))
        names.update(_surface.names_of(self.__lightning_path__))
        return sorted(names)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes a :class:`MirrorModule` for each public ``ddpkit.lightning.*`` path that Lightning
    1.x or 2.x has; every other name is left to the next finder."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PREFIX + "."):
            return None
        if any(part.startswith("_") for part in fullname[len(PREFIX) + 1 :].split(".")):
            return None  # ddpkit's own modules, and dunder names: real files
        if not _surface.is_module(lightning_path(fullname)):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return MirrorModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        if isinstance(module, MirrorModule):
            module.bind()


_FINDER = _Finder()


def install() -> None:
    """Put the mirror's finder first on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _FINDER)
