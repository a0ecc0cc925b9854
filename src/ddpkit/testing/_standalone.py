"""The command line of an isolated test's process.

For ``tests/test_x.py::test_fit[2]`` in a suite run from ``/repo`` each of its processes is::

    <sys.executable> -m pytest --rootdir=/repo [--config-file=/repo/pyproject.toml]
        -p ddpkit.testing.pytest_plugin -p no:cacheprovider --capture=tee-sys [-n 0]
        [the parent's -p / -o / -W / --import-mode / --confcutdir / --strict-markers /
         --noconftest / --runxfail / --ddpkit-strict-leaks options]
        /repo/tests/test_x.py::test_fit[2]

in the parent's working directory, with the environment of :func:`ddpkit.testing._worker
.child_environment`: a fresh interpreter, or a fork of the warm-start zygote that calls
``pytest.main`` with the same arguments and looks like this command line (``sys.argv``,
``sys.orig_argv``, ``__main__``). ``--capture=tee-sys`` keeps the test's output in its reports
(the parent shows it as pytest would) and still writes it to the log the parent reads on a
timeout (the last lines of a hung test are there); ``-n 0`` keeps pytest-xdist out of the child.
A Trainer with DDPPlugin in that process re-runs exactly this command line for its other ranks,
so each rank runs this one test.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

# Options that change how a test is collected or judged: the child gets them as given.
_WITH_VALUE = {
    "-p": "-p",
    "-o": "-o",
    "--override-ini": "-o",
    "-W": "-W",
    "--pythonwarnings": "-W",
    "--import-mode": "--import-mode",
    "--confcutdir": "--confcutdir",
}
_FLAGS = frozenset(
    {
        "--strict-markers",
        "--strict-config",
        "--strict",
        "--noconftest",
        "--runxfail",
        "--ddpkit-strict-leaks",
    }
)


def forwarded_args(args: Sequence[str]) -> list[str]:
    """The options of the parent's command line (``config.invocation_params.args``) that its
    isolated tests' interpreters need, normalized to ``[option, value]`` pairs and flags.
    Test selection (paths, ``-k``, ``-m``), output and xdist options are left out."""
    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg in _FLAGS:
            out.append(arg)
            continue
        # --name=value or --name value; -Xvalue, -X=value or -X value
        if arg.startswith("--"):
            name, sep, inline = arg.partition("=")
            value = inline if sep else None
        else:
            name, value = arg[:2], arg[2:].removeprefix("=") or None
        if name not in _WITH_VALUE:
            continue
        if value is None and (value := next(rest, None)) is None:
            break
        out += [_WITH_VALUE[name], value]
    return out


def node_argument(nodeid: str, path: Path) -> str:
    """The node id with an absolute file part: valid from any working directory, and what a
    DDPPlugin rank re-runs."""
    _, sep, rest = nodeid.partition("::")
    return f"{path}::{rest}" if sep else str(path)


def pytest_args(
    *,
    node: str,
    rootdir: Path,
    inifile: Path | None,
    forwarded: Sequence[str],
    xdist: bool,
) -> list[str]:
    """The arguments of ``python -m pytest`` for an isolated test (see the module docstring)."""
    args = [f"--rootdir={rootdir}"]
    if inifile is not None:
        args.append(f"--config-file={inifile}")
    args += ["-p", "ddpkit.testing.pytest_plugin", "-p", "no:cacheprovider", "--capture=tee-sys"]
    if xdist:
        args += ["-n", "0"]
    return [*args, *forwarded, node]


def pytest_command(args: Sequence[str]) -> list[str]:
    """The command line of an isolated test's fresh interpreter."""
    return [sys.executable, "-m", "pytest", *args]
