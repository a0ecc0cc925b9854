"""The processes of a standalone or distributed test: what they are told through the environment,
what they leave for the parent pytest in a private directory, and how a process forked from the
warm-start zygote becomes one.

Each process runs ``pytest <node id>`` (a fresh ``python -m pytest``, or a fork of the zygote
that calls ``pytest.main`` with the same arguments) with::

    DDPKIT_STANDALONE_CHILD=1         run the test inline (never isolate it again)
    DDPKIT_TESTING_DIR=<private dir>  where each process leaves its files (mode 0700)
    DDPKIT_TESTING_PARENT=<pid>       the process that started it (the parent pytest, or the
                                      zygote): a process whose parent it is was started for
                                      the test; any other is a rank the test started
    DDPKIT_TESTING_LOG=<file>         where the parent sends that process's output

Every process that inherits these (the ranks a Trainer with DDPPlugin starts re-run the same
command line) runs the test inline too. In the directory, each process ``<pid>`` leaves:

    proc-<pid>.json     its rank and where its output goes (written at start)
    report-<pid>.jsonl  its test reports, one serialized report a line
    arrived-<pid>       (distributed) it reached init_process_group
    rank<r>-<pid>.log   its output, for a process the test started (the parent opened the
                        others' log files itself)
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import io
import json
import os
import signal
import sys
import threading
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ddpkit._runtime.ranks._lifeline import die_with_parent
from ddpkit._runtime.ranks._names import (
    ENV_ISOLATED_TEST,
    ENV_TESTING_DIR,
    ENV_TESTING_LOG,
    ENV_TESTING_PARENT,
)
from ddpkit._runtime.ranks._scratch import write_private
from ddpkit.testing import import_readers
from ddpkit.testing.fresh_state import fresh_process_state

__all__ = [
    "DUMP_SIGNAL",
    "ENV_CHILD",
    "ENV_DIR",
    "ENV_LOG",
    "ENV_PARENT",
    "ForkRequest",
    "IsolatedProcess",
    "PER_TEST_PREFIXES",
    "PER_TEST_VARIABLES",
    "ProcessRecord",
    "become_test_process",
    "child_environment",
    "ends_without_finalizing",
    "exit_now",
    "is_per_test",
    "read_records",
    "run_forked",
    "stdio_to",
]

ENV_CHILD = ENV_ISOLATED_TEST
ENV_DIR = ENV_TESTING_DIR
ENV_PARENT = ENV_TESTING_PARENT
ENV_LOG = ENV_TESTING_LOG

#: The variables that differ from one test process to the next: a module the zygote preloads
#: must not read them (see :mod:`ddpkit.testing.preload`).
PER_TEST_VARIABLES = frozenset(
    {
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "OMP_NUM_THREADS",
        "PYTEST_CURRENT_TEST",
        "PYTEST_DEBUG_TEMPROOT",
    }
)
PER_TEST_PREFIXES = ("DDPKIT_",)


def is_per_test(key: str) -> bool:
    """Whether ``key`` is one of the variables that differ from one test process to the next."""
    return key in PER_TEST_VARIABLES or key.startswith(PER_TEST_PREFIXES)


#: On a timeout the parent sends this to every process of the test before killing it: each
#: one dumps the Python stack of every thread into its output, which the report shows.
DUMP_SIGNAL = signal.SIGUSR1


def child_environment(
    base: Mapping[str, str], *, directory: Path, parent_pid: int, log: Path
) -> dict[str, str]:
    """``base`` plus what a process of an isolated test needs."""
    env = dict(base)
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update(
        {
            ENV_CHILD: "1",
            ENV_DIR: str(directory),
            ENV_PARENT: str(parent_pid),
            ENV_LOG: str(log),
            # Output reaches the log as it is written: the last lines of a hung rank are there.
            "PYTHONUNBUFFERED": "1",
            # Each process's tmp_path under the private directory (removed after the test),
            # and no process wipes another's (--basetemp would be wiped by every rank).
            "PYTEST_DEBUG_TEMPROOT": str(directory / "tmp"),
        }
    )
    return env


def _rank_from(env: Mapping[str, str]) -> int:
    for name in ("RANK", "LOCAL_RANK"):
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


@dataclass(frozen=True)
class IsolatedProcess:
    """This process, when it is one of an isolated test's processes."""

    directory: Path
    parent_pid: int
    rank: int
    direct: bool
    """Started for the test by the parent pytest or the zygote (else: a rank the test started)."""
    log: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> IsolatedProcess | None:
        env = os.environ if env is None else env
        if env.get(ENV_CHILD) != "1" or not env.get(ENV_DIR):
            return None
        directory = Path(env[ENV_DIR])
        parent = int(env.get(ENV_PARENT, "0") or 0)
        rank = _rank_from(env)
        direct = os.getppid() == parent
        log = (
            Path(env[ENV_LOG])
            if direct and env.get(ENV_LOG)
            else (directory / f"rank{rank}-{os.getpid()}.log")
        )
        return cls(directory=directory, parent_pid=parent, rank=rank, direct=direct, log=log)

    def start(self) -> None:
        """Called once the plugin is configured: send this process's output to its own log (a
        rank the test started inherited its parent's), arm the stack dump, and register."""
        if not self.direct:
            _redirect_output(self.log)
        faulthandler.register(DUMP_SIGNAL, all_threads=True)
        self.register()

    def register(self) -> None:
        """Tell the parent this process belongs to the test (its rank and its log)."""
        record = {
            "pid": os.getpid(),
            "rank": self.rank,
            "direct": self.direct,
            "log": str(self.log),
        }
        write_private(self.directory / f"proc-{os.getpid()}.json", json.dumps(record).encode())

    def record_report(self, data: Mapping[str, Any]) -> None:
        """Append one serialized test report (a line of JSON)."""
        with open(self.directory / f"report-{os.getpid()}.jsonl", "a") as fh:
            fh.write(json.dumps(data) + "\n")

    def mark_arrived(self) -> None:
        """Distributed: this rank reached init_process_group."""
        write_private(self.directory / f"arrived-{os.getpid()}", str(self.rank).encode())


def _redirect_output(path: Path) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


@dataclass(frozen=True)
class ProcessRecord:
    """What one process of the test left in the directory."""

    pid: int
    rank: int
    direct: bool
    log: Path
    reports: tuple[dict[str, Any], ...]
    arrived: bool


def read_records(directory: Path) -> dict[int, ProcessRecord]:
    """Every process that registered in ``directory``, by pid."""
    records: dict[int, ProcessRecord] = {}
    for path in sorted(directory.glob("proc-*.json")):
        try:
            meta = json.loads(path.read_text())
            pid = int(meta["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        reports: list[dict[str, Any]] = []
        report_file = directory / f"report-{pid}.jsonl"
        if report_file.exists():
            for line in report_file.read_text().splitlines():
                try:
                    reports.append(json.loads(line))
                except ValueError:  # a line cut short by a kill
                    break
        records[pid] = ProcessRecord(
            pid=pid,
            rank=int(meta.get("rank", 0)),
            direct=bool(meta.get("direct", False)),
            log=Path(meta.get("log", "")),
            reports=tuple(reports),
            arrived=(directory / f"arrived-{pid}").exists(),
        )
    return records


# -- a process forked from the zygote -----------------------------------------------------------


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

    def to_json(self) -> str:
        data = {"args": self.args, "env": dict(self.env), "cwd": self.cwd, "log": self.log}
        return json.dumps({**data, "fd_env": dict(self.fd_env), "nodeid": self.nodeid})

    @classmethod
    def from_json(cls, raw: str) -> ForkRequest:
        data = json.loads(raw)
        return cls(
            args=tuple(data["args"]),
            env=data["env"],
            cwd=data["cwd"],
            log=data["log"],
            fd_env=data["fd_env"],
            nodeid=data.get("nodeid", ""),
        )


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
