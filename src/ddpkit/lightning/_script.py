"""The user's script, run as this module's code: what ``python -m ddpkit.lightning SCRIPT`` runs
as ``__main__``, and what each rank runs again.

Importing this module (``runpy`` does, as ``__main__`` or a spawned rank's ``__mp_main__``) reads
the script named by ``DDPKIT_LIGHTNING_SCRIPT`` (a path) or ``DDPKIT_LIGHTNING_MODULE`` (a module
name), ports its ``pytorch_lightning`` imports (:mod:`ddpkit.lightning._rewrite`, which also ports
the project's other modules as they are imported) and runs it in this module's namespace, with
``__file__`` and ``sys.argv[0]`` the script's. Every way a rank starts finds it again:

- ddpkit's subprocess launcher re-runs the command line, ``python -m ddpkit.lightning SCRIPT``;
- Lightning's own (``popen``) runs ``python -m ddpkit.lightning._script`` (this module's name);
- a spawned rank imports this module by name (``__spec__``) before it unpickles anything, so the
  classes the script defines exist in it, ported.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from ddpkit.lightning import _rewrite
from ddpkit.lightning._rewrite import MODULE_ENV, SCRIPT_ENV


def _source() -> tuple[bytes, str]:
    path = os.environ.get(SCRIPT_ENV)
    if path:
        folder = os.path.dirname(path)
        if folder not in sys.path:  # a rank started as `python -m ...._script`: as `python path`
            sys.path.insert(0, folder)
        with open(path, "rb") as fh:
            return fh.read(), path
    name = os.environ.get(MODULE_ENV)
    spec = importlib.util.find_spec(name) if name else None
    if spec is None or spec.origin is None or spec.loader is None:
        raise ImportError(
            f"ddpkit.lightning._script runs the script `python -m ddpkit.lightning SCRIPT` "
            f"names (${SCRIPT_ENV} or ${MODULE_ENV}); neither names one here "
            f"({SCRIPT_ENV}={path!r}, {MODULE_ENV}={name!r}). Fix: python -m ddpkit.lightning "
            f"train.py [ARGS...]"
        )
    with open(spec.origin, "rb") as fh:
        return fh.read(), spec.origin


def _run() -> None:
    source, filename = _source()
    _rewrite.install()
    namespace = globals()
    namespace["__file__"] = filename
    namespace.pop("__cached__", None)
    if sys.argv:
        sys.argv[0] = filename
    exec(_rewrite.port_source(source, filename), namespace)


_run()
