"""Every public ``__all__`` is sorted, and every name in it imports."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ddpkit

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(ddpkit.__path__, prefix="ddpkit.")
    if info.name not in ("ddpkit.__main__",)
)


@pytest.mark.parametrize("name", ["ddpkit", *MODULES])
def test_all_is_sorted_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
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
