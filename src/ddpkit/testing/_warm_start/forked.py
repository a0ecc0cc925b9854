"""How a process forked from a zygote becomes a test's process: the request the parent sends
(:class:`ForkRequest`), the process ``python -m pytest <args>`` would be (environment, working
directory, output, command line, :mod:`fresh_state <ddpkit.testing._warm_start.fresh_state>`),
and its end (:func:`exit_now`).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import signal
import sys
import threading
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ddpkit._runtime.ranks._lifeline import die_with_parent
from ddpkit.testing._warm_start import import_readers
from ddpkit.testing._warm_start.fresh_state import fresh_process_state


@dataclass(frozen=True)
class ForkRequest:
    """What the parent asks the zygote to fork: the process a fresh ``python -m pytest <args>``
    in ``cwd`` with ``env`` would be. ``fd_env``: variables whose value is a descriptor the
    request carries (by its index among them), e.g. rank 0's listening store socket."""

    args: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    log: str
    fd_env: Mapping[str, int]
    nodeid: str = ""
    """The test: what a rank forked from the parent session itself runs."""

    @classmethod
    def from_message(cls, data: Mapping[str, Any]) -> ForkRequest:
        """The request the parent sent as :func:`dataclasses.asdict` made it (JSON turned its
        tuple into a list)."""
        return cls(**{**data, "args": tuple(data["args"])})


def stdio_to(log: str) -> None:
    """fd 0 from /dev/null, fds 1 and 2 to the log, and ``sys.std*`` unbuffered over them, as
    ``PYTHONUNBUFFERED=1`` makes them in a fresh interpreter."""
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)
    encoding = sys.stdout.encoding or "utf-8"
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding)
    sys.stdin = stdin
    setattr(sys, "__stdin__", stdin)  # noqa: B010 (a Final name in typeshed)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        raw: Any = io.FileIO(fd, "w", closefd=False)
        errors = "backslashreplace" if fd == 2 else "strict"
        stream = io.TextIOWrapper(raw, encoding, errors, write_through=True)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _as_python_m_pytest(args: Sequence[str], cwd: str) -> None:
    """Make this process look like ``python -m pytest <args>`` started in ``cwd``: ``sys.argv``,
    ``sys.orig_argv`` (what DDPPlugin re-runs), ``__main__`` and ``sys.path[0]``."""
    import importlib.util

    spec = importlib.util.find_spec("pytest.__main__")
    main: Any = types.ModuleType("__main__")
    main.__spec__ = spec
    main.__file__ = spec.origin if spec is not None else None
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    sys.argv = [main.__file__ or "pytest", *args]
    sys.orig_argv = [sys.executable, "-m", "pytest", *args]
    if sys.path and sys.path[0] in ("", "."):
        sys.path[0] = cwd


_forked = False


def ends_without_finalizing() -> bool:
    """A test process forked from a zygote or the session: it ends through :func:`exit_now`."""
    return _forked


def exit_now(code: int) -> NoReturn:
    """End as an interpreter ends (non-daemon threads joined, atexit handlers run, output
    flushed) without tearing down the modules copied from the zygote, which only costs time."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def become_test_process(request: ForkRequest, fds: Sequence[int], zygote_pid: int) -> None:
    """In a process just forked from a zygote: become the process ``python -m pytest <args>``
    would be, with the request's environment, working directory, output and command line."""
    global _forked
    _forked = True  # it ends through exit_now (run_forked, session_fork)
    os.setsid()  # a session of its own: the parent ends the test's whole tree through it
    die_with_parent(zygote_pid, death_signal=signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    env = dict(request.env)
    env.update({name: str(fds[i]) for name, i in request.fd_env.items()})
    os.chdir(request.cwd)
    computed = import_readers.held()  # from the zygote's environment, still
    os.environ.clear()
    os.environ.update(env)
    import_readers.recompute(computed)
    stdio_to(request.log)
    _as_python_m_pytest(request.args, request.cwd)
    fresh_process_state(env)


def run_forked(request: ForkRequest, fds: Sequence[int], zygote_pid: int) -> NoReturn:
    """In a process just forked from the ``python -c BOOT`` zygote: become ``python -m pytest
    <args>``, run it, and exit with its status."""
    become_test_process(request, fds, zygote_pid)
    code = 1
    try:
        import pytest

        code = int(pytest.main(list(request.args)))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    exit_now(code)
