"""ddpkit's markers used where ddpkit's pytest plugin is not loaded: one error that says how to
load it.

ddpkit's plugin is opt-in: without it, ``@pytest.mark.distributed`` is an unknown mark and the
test fails with pytest's ``fixture 'dist' not found``, and ``@pytest.mark.standalone`` runs the
test in the session itself, where its ``DDPPlugin`` cannot start ranks. This module is what
pytest loads in every session once ddpkit is installed (the ``pytest11`` entry point
``ddpkit_marker_check``; ``-p no:ddpkit_marker_check`` turns it off). It imports nothing but
pytest, reads no file, and does nothing in a session that loaded ddpkit's plugin or has no test
with either marker. A session that uses them without the plugin stops after collection with one
``ERROR:`` line that names the tests and the line that loads the plugin.

Under ``--strict-markers`` pytest refuses the unknown marker while it collects the module; that
error gets the same fix appended.

A marker the session declares itself (a ``markers`` ini line, or another plugin that registers
one by that name) is someone else's: it is left alone, as is ``standalone`` in a session that
does not use ddpkit at all.
"""

from __future__ import annotations

import sys
import types

import pytest

__all__ = ["pytest_collection_modifyitems", "pytest_collectreport"]

PLUGIN = "ddpkit.testing.pytest_plugin"
_MARKERS = ("distributed", "standalone")
_SHOWN = 3


def _loaded(config: pytest.Config) -> bool:
    module = sys.modules.get(PLUGIN)
    return module is not None and config.pluginmanager.is_registered(module)


def _declared(config: pytest.Config) -> set[str]:
    """The markers the session declares (ini lines, plugins' ``addinivalue_line``)."""
    return {str(line).split(":")[0].split("(")[0].strip() for line in config.getini("markers")}


def _uses_ddpkit(item: pytest.Item) -> bool:
    """The test's module holds something of ddpkit's (``import ddpkit``, ``from ddpkit import
    Trainer``), or a module of ddpkit's beyond this check was imported."""
    module = getattr(item, "module", None)
    for value in vars(module).values() if module is not None else ():
        home = value.__name__ if isinstance(value, types.ModuleType) else _module_of(value)
        if home.split(".")[0] == "ddpkit":
            return True
    return any(
        name.startswith("ddpkit.") and name not in ("ddpkit.__about__", "ddpkit.testing", __name__)
        for name in sys.modules
    )


def _module_of(value: object) -> str:
    try:
        return str(getattr(value, "__module__", "") or "")
    except Exception:
        return ""


def _ddpkits(item: pytest.Item, declared: set[str]) -> str | None:
    """The ddpkit marker ``item`` relies on without the plugin, or None."""
    for name in _MARKERS:
        if name in declared or item.get_closest_marker(name) is None:
            continue
        needs_dist = name == "distributed" and "dist" in getattr(item, "fixturenames", ())
        if needs_dist or _uses_ddpkit(item):
            return name
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _loaded(config) or not items:
        return
    declared = _declared(config)
    marked = [(item, m) for item in items if (m := _ddpkits(item, declared))]
    if not marked:
        return
    names = sorted({m for _, m in marked})
    shown = ", ".join(item.nodeid for item, _ in marked[:_SHOWN])
    more = f" and {len(marked) - _SHOWN} more" if len(marked) > _SHOWN else ""
    marks = " and ".join(f"@pytest.mark.{n}" for n in names)
    dist = ", with the dist fixture" if "distributed" in names else ""
    raise pytest.UsageError(
        f"{shown}{more} {'is' if len(marked) == 1 else 'are'} marked {marks}, which "
        f"ddpkit's pytest plugin runs (in processes of their own{dist}), but the plugin is "
        f"not loaded. {_fix()}"
    )


def _fix() -> str:
    return (
        f"Fix: pytest -p {PLUGIN}, or load it for every run: "
        f'addopts = "-p {PLUGIN}" under [tool.pytest.ini_options] in pyproject.toml '
        f'(or pytest_plugins = ["{PLUGIN}"] in the top conftest.py).'
    )


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """``--strict-markers`` refused one of ddpkit's markers: say where it comes from."""
    if not report.failed or PLUGIN in sys.modules:
        return
    text = report.longreprtext
    found = [m for m in _MARKERS if f"'{m}' not found in `markers`" in text]
    if found:
        report.longrepr = (
            f"{text}\nddpkit: @pytest.mark.{found[0]} is ddpkit's, and its pytest plugin, which "
            f"declares it, is not loaded. {_fix()}"
        )
