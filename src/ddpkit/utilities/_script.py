"""Is there a script to re-run? The one place that asks (the connector's probe, the subprocess
launcher, the spawn launcher's main-guard check)."""

from __future__ import annotations

import os
import sys


def has_script() -> bool:
    """True when this process runs a script (or a ``python -m`` module) that can be re-run;
    False in an interactive shell, a notebook, ``python -c`` or a script piped to ``python -``
    (whose ``__file__`` is ``"<stdin>"``, no file)."""
    main = sys.modules.get("__main__")
    if hasattr(sys, "ps1") or bool(sys.flags.interactive):
        return False
    path = getattr(main, "__file__", None)
    return bool(path) and os.path.isfile(str(path))
