"""The processes of a standalone or distributed test: what they are told through the environment,
and what they leave for the parent pytest in a private directory. (How a process forked from
the warm start's zygote becomes one: :mod:`ddpkit.testing._warm_start`.)

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

import faulthandler
import json
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpkit._runtime.launch._pytest_session import remember_isolated_test
from ddpkit._runtime.ranks._names import ENV_ISOLATED_TEST as ENV_CHILD
from ddpkit._runtime.ranks._names import ENV_TESTING_DIR as ENV_DIR
from ddpkit._runtime.ranks._names import ENV_TESTING_LOG as ENV_LOG
from ddpkit._runtime.ranks._names import ENV_TESTING_PARENT as ENV_PARENT
from ddpkit._runtime.ranks._scratch import write_private

#: On a timeout the parent sends this to every process of the test before killing it: each
#: one dumps the Python stack of every thread into its output, which the report shows.
DUMP_SIGNAL = signal.SIGUSR1


def child_environment(
    base: Mapping[str, str], *, directory: Path, parent_pid: int, log: Path
) -> dict[str, str]:
    """``base`` plus what a process of an isolated test needs."""
    env = {
        **base,
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
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _rank_from(env: Mapping[str, str]) -> int:
    ranks = (env.get(name, "") for name in ("RANK", "LOCAL_RANK"))
    return next((int(value) for value in ranks if value.isdigit()), 0)


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
        remember_isolated_test()  # a test may clear os.environ around a DDPPlugin fit
        if not self.direct:
            sys.stdout.flush()
            sys.stderr.flush()
            fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
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
