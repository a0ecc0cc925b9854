"""``python -m ddpkit.lightning SCRIPT [ARGS...]`` (or ``-m MODULE [ARGS...]``): run a Lightning
1.x script unchanged, its ``pytorch_lightning`` imports — and those of the project's modules it
imports — resolved to ``ddpkit.lightning`` (:mod:`ddpkit.lightning._script`). Its ranks run the
same way."""

from __future__ import annotations

import os
import runpy
import sys

from ddpkit.lightning._rewrite import MODULE_ENV, SCRIPT_ENV

_USAGE = (
    "usage: python -m ddpkit.lightning SCRIPT [ARGS...]\n"
    "       python -m ddpkit.lightning -m MODULE [ARGS...]\n"
    "Runs a Lightning 1.x script as written: its `pytorch_lightning` imports (and those of the "
    "project's own modules) become `ddpkit.lightning`."
)


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stderr if not argv else sys.stdout)
        raise SystemExit(2 if not argv else 0)
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit(f"python -m ddpkit.lightning -m: a module name is missing.\n{_USAGE}")
        os.environ[MODULE_ENV], rest = argv[1], argv[2:]
        os.environ.pop(SCRIPT_ENV, None)
        sys.argv = [argv[1], *rest]
        # `python -m` already put the working directory first, as for the module itself
    else:
        script = os.path.abspath(argv[0])
        if not os.path.isfile(script):
            raise SystemExit(f"python -m ddpkit.lightning {argv[0]}: no such file.\n{_USAGE}")
        os.environ[SCRIPT_ENV] = script
        os.environ.pop(MODULE_ENV, None)
        sys.argv = [script, *argv[1:]]
        sys.path[0] = os.path.dirname(script)  # as `python script.py` puts its folder first
    runpy.run_module("ddpkit.lightning._script", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
