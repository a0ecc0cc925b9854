"""Whether the command line a DDPPlugin would re-run for its other ranks is a whole pytest
session: under plain pytest, rank 1 would then run every test of the session again (and the
run would pass twice over, or hang in a collective nobody else joins).

ddpkit's pytest plugin runs a ``@pytest.mark.standalone`` test in an interpreter of its own whose
command line names that one test, and marks it with :data:`ENV_ISOLATED_TEST`: re-running that
command is what the ranks should do. Any other pytest session is refused before a rank starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from types import ModuleType

from ddpkit._runtime.ranks._names import ENV_ISOLATED_TEST
from ddpkit.errors import LaunchError

#: The module name of ddpkit's pytest plugin, as ``-p`` takes it.
PLUGIN = "ddpkit.testing.pytest_plugin"

_PYTEST_MAINS = frozenset({"pytest", "pytest.__main__", "py.test"})
_PYTEST_SCRIPTS = frozenset({"pytest", "py.test", "pytest.exe", "py.test.exe"})

#: Set by ddpkit's pytest plugin in an isolated test's process: the test is marked, so a
#: missing :data:`ENV_ISOLATED_TEST` later means the test cleared ``os.environ`` itself.
_isolated = False


def remember_isolated_test() -> None:
    """Called by ddpkit's pytest plugin when this process becomes an isolated test's."""
    global _isolated
    _isolated = True


def is_pytest_session(
    main: ModuleType | None,
    modules: Mapping[str, ModuleType],
    env: Mapping[str, str] | None = None,
) -> bool:
    """True when this process is a pytest session: ``python -m pytest``, the ``pytest`` script,
    or a pytest-xdist worker (``main``: the ``__main__`` module; ``modules``: ``sys.modules``;
    ``env``: ``os.environ``)."""
    if "xdist.remote" in modules or _is_xdist_worker(main, modules, env):
        return True
    if main is None:
        return False
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name in _PYTEST_MAINS:
        return True
    path = getattr(main, "__file__", None) or ""
    return os.path.basename(path) in _PYTEST_SCRIPTS


def _is_xdist_worker(
    main: ModuleType | None, modules: Mapping[str, ModuleType], env: Mapping[str, str] | None
) -> bool:
    """A pytest-xdist worker is ``python -c`` (execnet runs xdist's remote code as source, so no
    ``xdist.remote`` module is imported) with xdist's plugin loaded and PYTEST_XDIST_WORKER set
    by the worker itself. A script a test starts inherits the variable, but has a file of its own
    and no xdist."""
    env = os.environ if env is None else env
    scriptless = main is None or not getattr(main, "__file__", None)
    return scriptless and "xdist.plugin" in modules and bool(env.get("PYTEST_XDIST_WORKER"))


def check_not_a_pytest_session(env: Mapping[str, str] | None = None) -> None:
    """Raise :class:`LaunchError` when re-running this process's command line would re-run a
    pytest session, unless ddpkit's plugin started this process for one isolated test."""
    env = os.environ if env is None else env
    if env.get(ENV_ISOLATED_TEST) == "1":
        return
    if not is_pytest_session(sys.modules.get("__main__"), sys.modules, env):
        return
    command = " ".join(getattr(sys, "orig_argv", sys.argv)[1:]) or "pytest"
    if _isolated:
        # Marked and isolated, but the variables are gone: every rank would read an emptied
        # environment (rank 1 would take itself for rank 0 and start ranks of its own).
        raise LaunchError(
            f"DDPPlugin starts the other ranks by re-running this process's command line (python "
            f"{command}), and this @pytest.mark.standalone test removed the variables that make "
            f"each rank run it as that test's rank ({ENV_ISOLATED_TEST} and the rank variables) "
            f"from os.environ (mock.patch.dict(os.environ, {{...}}, clear=True)?). Fix: patch "
            f"without clear=True, or start from a copy: mock.patch.dict(os.environ, "
            f"{{**os.environ, ...}}, clear=True)."
        )
    if PLUGIN in sys.modules:
        fix = (
            "Fix: mark the test @pytest.mark.standalone: ddpkit's pytest plugin (loaded here) "
            "then runs it alone, and each rank re-runs that one test."
        )
    else:
        fix = (
            f"Fix: load ddpkit's pytest plugin (-p {PLUGIN}) and mark the test "
            f"@pytest.mark.standalone: each rank then re-runs that one test."
        )
    raise LaunchError(
        f"DDPPlugin starts the other ranks by re-running this process's command line, and this "
        f"process is a pytest session (python {command}): every other rank would run the whole "
        f"session again. {fix}"
    )
