"""Every public ``__all__`` is sorted, and every name in it imports."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ddpkit

#: Modules that run when imported: a command's entry point, the script of
#: `python -m ddpkit.lightning` (it runs the user's script).
RUNS_ON_IMPORT = ("ddpkit.__main__", "ddpkit.lightning.__main__", "ddpkit.lightning._script")
MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(ddpkit.__path__, prefix="ddpkit.")
    if info.name not in RUNS_ON_IMPORT
)


def _private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split(".")[1:])


@pytest.mark.parametrize("name", ["ddpkit", *MODULES])
def test_all_is_sorted_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    if exported is None and _private(name):
        return  # a private module's names are its package's business
    assert exported is not None, f"{name} has no __all__: export its public names deliberately"
    assert list(exported) == sorted(exported), f"{name}.__all__ is not sorted"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names {attr!r}, which is missing"


def test_top_level_face() -> None:
    for attr in ("Trainer", "Module", "seed_everything", "MisconfigurationError", "__version__"):
        assert attr in ddpkit.__all__


def test_py_typed_ships() -> None:
    from pathlib import Path

    assert (Path(ddpkit.__file__).parent / "py.typed").exists()
