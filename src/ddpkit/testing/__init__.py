"""Test helpers for ddpkit's users: fakes and the pytest plugin (opt-in).

Load the plugin with ``-p ddpkit.testing.pytest_plugin`` or
``pytest_plugins = ["ddpkit.testing.pytest_plugin"]``; it gives ``@pytest.mark.standalone``,
``@pytest.mark.distributed`` and its ``dist`` fixture (a :class:`DistInfo`), and keeps process
groups and child processes from leaking out of a test. See docs/testing.md.

The public names are imported on first use (PEP 562): :mod:`ddpkit.testing.marker_check`, which
pytest loads in every session where ddpkit is installed, imports nothing but pytest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddpkit.testing._distributed import DistInfo
    from ddpkit.testing._fakes import make_probe

__all__ = ["DistInfo", "make_probe"]

_HOMES = {"DistInfo": "ddpkit.testing._distributed", "make_probe": "ddpkit.testing._fakes"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ddpkit.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
