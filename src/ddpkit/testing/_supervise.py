"""The parent's side of an isolated test: start its processes (fresh interpreters, or forks of
the warm-start zygote), watch them against the timeout, end the whole process tree, and gather
what each process left.

The parent supervises its processes as a launcher supervises its ranks, through the same
:class:`~ddpkit._runtime.process.context.ProcessContext`: each process it started is one of the
context's ranks, started by the same recipe (``start_popen``: a session of its own, SIGKILL when
the parent dies); the context's poll (``watch``) ends the job at the first failure, the timeout
or an interrupt, and its ``close`` ends the tree and says how in the launchers' words. The
parent's own part: its policy (a failure ends the others only after a grace period; a timeout
first has each process dump its stacks), and the processes still running after every
interpreter ended. Because each process started for the test leads a session of its own, every
process the test starts (the ranks of a DDPPlugin Trainer, anything they start) can be found and
ended, even after its parent died.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ddpkit._runtime.process.context import ChildFailed, ProcessContext, TimedOut
from ddpkit._runtime.process.proc import Rank, start_popen
from ddpkit.errors import RankFailure
from ddpkit.testing._worker import DUMP_SIGNAL, ProcessRecord, read_records
from ddpkit.utilities import _procs as procs

#: How long the processes get to write their stacks before the kill, on a timeout.
DUMP_SECONDS = 1.0
#: After one rank fails, how long the others get to end on their own before they are ended.
FAIL_GRACE_SECONDS = 5.0
#: Then, how long they have between SIGTERM and SIGKILL (at a timeout: none, the stacks are in).
END_GRACE_SECONDS = 2.0
#: How many of its last lines of output a process's end keeps (a report shows fewer).
TAIL_LINES = 100


def tail(path: Path, lines: int = TAIL_LINES, end: int | None = None) -> str:
    """The last ``lines`` lines of a log, up to byte ``end`` ('' when it is missing)."""
    end = _size(path) if end is None else end
    start = max(0, end - 64 * 1024)
    return "\n".join(_read(path, start, end - start).splitlines()[-lines:])


def _read(path: Path, start: int, size: int) -> str:
    """At most ``size`` bytes of ``path`` from byte ``start`` ('' when it is missing)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            return fh.read(size).decode(errors="replace")
    except OSError:
        return ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def condensed_stacks(text: str, frames: int = 8) -> str:
    """A faulthandler dump of every thread, each thread's innermost ``frames`` frames, the
    thread that took the signal (the main thread, where the test runs) first."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if "(most recent call first)" in line:
            blocks.append([line.strip()])
        elif line.startswith("  File ") and blocks:
            block = blocks[-1]
            if len(block) <= frames:
                block.append(line.rstrip())
            elif len(block) == frames + 1:
                block.append("  ...")
    blocks.sort(key=lambda b: not b[0].startswith("Current thread"))
    return "\n".join(line for block in blocks for line in block)


@dataclass(frozen=True)
class ProcessEnd:
    """How one process of the test ended, and what it left."""

    rank: int
    pid: int
    direct: bool
    """Started by the parent (else: started by the test, e.g. a DDPPlugin rank)."""
    exitcode: int | None
    """The exit status of a process the parent started (negative: the signal); None for the
    others, whose parent was not this process."""
    record: ProcessRecord | None
    """What it left in the directory; None when it died before registering."""
    ended_by_ddpkit: bool
    """Still running when the parent ended the job (timeout, or another rank failed)."""
    ended_at: float
    """Wall-clock time (``time.time()``) at which the parent saw it end."""
    log: Path
    output: str
    """The last :data:`TAIL_LINES` lines of its output (before its stack dump, on a timeout)."""
    stacks: str = ""
    """On a timeout: the Python stack of each of its threads when the parent ended it."""
    ended_how: str = ""
    """How ddpkit ended it, in the launchers' words
    (:meth:`~ddpkit._runtime.process.ending.Ending.note`); '' when it ended on its own."""

    @property
    def arrived(self) -> bool:
        return self.record is not None and self.record.arrived

    @property
    def fate(self) -> RankFailure:
        """How it ended, as a launcher reports a rank: ``fate.line()`` is 'rank 1 (pid 4242):
        exit code 1'. A process the parent did not start has no exit status it can read."""
        note = self.ended_how or ("" if self.direct else "ended")
        return RankFailure(rank=self.rank, pid=self.pid, exitcode=self.exitcode, note=note)


@dataclass(frozen=True)
class JobEnd:
    processes: tuple[ProcessEnd, ...]
    """Every process of the test, in rank order (processes the parent started first)."""
    timed_out: bool
    timeout: float | None
    leftover: tuple[str, ...]
    """Processes still running after every interpreter the parent started had ended (ended
    by ddpkit), as ``pid: command``."""


class Job:
    """The processes of one isolated test. ``idle(seconds)`` is how the context's poll waits
    between looks: a zygote's message pump (an exit is seen at once) or ``time.sleep``."""

    def __init__(self, directory: Path, idle: Callable[[float], None] = time.sleep) -> None:
        self.directory = directory
        self._idle = idle
        # Its processes: the ranks of a process context (records are read from the directory).
        self.context = ProcessContext("an isolated test", lambda rank: None)
        #: processes found still running after every interpreter had ended: pid -> command
        self._leftover: dict[int, str] = {}
        # pid -> the size of its log just before it was asked to dump its stacks
        self._dumped_at: dict[int, int] = {}

    def start(
        self,
        rank: int,
        command: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        log: Path,
        pass_fds: Sequence[int] = (),
    ) -> None:
        # A session of its own (every process the test starts can be found and ended through
        # it), and SIGKILL when the parent pytest dies (killed, or ended by pytest-timeout).
        proc = start_popen(
            command,
            env,
            log=log,
            cwd=cwd,
            pass_fds=pass_fds,
            new_session=True,
            death_signal=signal.SIGKILL,
        )
        self.context.adopt(rank, proc, log)

    @property
    def pids(self) -> list[int]:
        return list(self.context.pids().values())

    def wait(self, timeout: float | None, fail_grace: float = FAIL_GRACE_SECONDS) -> JobEnd:
        """Wait until every interpreter the parent started has ended, or the timeout (then the
        whole tree is ended, after each process dumped its stacks), or ``fail_grace`` seconds
        after one of them failed (then the others are ended)."""
        try:
            outcome = self.context.watch(
                self._idle, failed=self._failed, fail_grace=fail_grace, timeout=timeout
            )
        except BaseException:  # Ctrl-C or the suite's own timeout: leave nothing behind
            self._end("after the test run was interrupted", dump=False)
            raise
        if isinstance(outcome, TimedOut):
            self._end(f"at the test's timeout ({outcome.timeout:g} s)", dump=True)
        elif isinstance(outcome, ChildFailed) and any(
            r.ended_at is None for r in self.context.ranks
        ):
            self._end(f"after rank {outcome.first.rank} failed", dump=False)
        self._end_leftovers()
        return JobEnd(
            processes=self._gather(),
            timed_out=isinstance(outcome, TimedOut),
            timeout=timeout,
            leftover=tuple(f"{pid}: {command}" for pid, command in self._leftover.items()),
        )

    def kill(self) -> None:
        """End every process of the job now (a start that failed half-way)."""
        self._end("after the test's start failed", dump=False)

    def _failed(self, s: Rank) -> bool:
        """An interpreter that ended, and not with exit status 0 and only 'passed' reports."""
        if (code := s.poll()) is None:
            return False
        record = read_records(self.directory).get(s.pid)
        passed = record is not None and all(r.get("outcome") == "passed" for r in record.reports)
        return code != 0 or not passed

    def _end(self, reason: str, *, dump: bool) -> None:
        """End the whole tree as a launcher ends its ranks; at a timeout each process first
        dumps its stacks, and then there is no grace (the stacks say where it hung)."""
        if dump:
            self._dump_stacks()
        self.context.close(reason, grace=0.0 if dump else END_GRACE_SECONDS)

    def _dump_stacks(self) -> None:
        running = procs.tree(self.pids)
        records = read_records(self.directory)
        # Where each process writes: the log the parent opened for it, else the one it named.
        logs = {s.pid: s.log for s in self.context.ranks if s.log is not None}
        for pid in sorted(running & set(records)):
            self._dumped_at[pid] = _size(logs.get(pid, records[pid].log))
            procs.send_signal(pid, DUMP_SIGNAL)
        time.sleep(DUMP_SECONDS)

    def _output(self, pid: int, log: Path) -> tuple[str, str]:
        """(last lines of output, condensed stacks) of ``pid``."""
        if pid not in self._dumped_at:
            return tail(log), ""
        offset = self._dumped_at[pid]
        return tail(log, end=offset), condensed_stacks(_read(log, offset, 256 * 1024))

    def _end_leftovers(self) -> None:
        """Processes of the tree still running once every interpreter ended: the test left
        them behind (the report lists them), and they go too."""
        running = sorted(procs.tree(self.pids))
        self._leftover = {pid: procs.cmdline(pid) or "?" for pid in running}
        if running:
            procs.end_processes(running, grace=1.0)

    def _ended_how(self, pid: int) -> str:
        ending = self.context.ending
        if ending is not None and (how := ending.note(pid)):
            return how
        if pid in self._leftover:
            return "still running after the test's interpreters ended; ended by ddpkit"
        return ""

    def _process_end(
        self,
        rank: int,
        pid: int,
        log: Path,
        *,
        started: Rank | None,
        record: ProcessRecord | None,
    ) -> ProcessEnd:
        output, stacks = self._output(pid, log)
        how = self._ended_how(pid)
        return ProcessEnd(
            rank=rank,
            pid=pid,
            direct=started is not None,
            exitcode=None if started is None else started.poll(),
            record=record,
            ended_by_ddpkit=bool(how),
            ended_at=time.time() if started is None else (started.ended_at or time.time()),
            log=log,
            output=output,
            stacks=stacks,
            ended_how=how,
        )

    def _gather(self) -> tuple[ProcessEnd, ...]:
        records = read_records(self.directory)
        ends = []
        for s in self.context.ranks:
            assert s.log is not None  # every process of the test has its log
            record = records.pop(s.pid, None)
            ends.append(self._process_end(s.rank, s.pid, s.log, started=s, record=record))
        # Then those the test started, which only their records name.
        for r in sorted(records.values(), key=lambda r: (r.rank, r.pid)):
            ends.append(self._process_end(r.rank, r.pid, r.log, started=None, record=r))
        return tuple(ends)
