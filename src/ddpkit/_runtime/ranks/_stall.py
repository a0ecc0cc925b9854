"""Stall detection: a rank that never reaches the collective the other ranks wait in.

Every rank counts the collectives it enters (the backward all-reduce of each optimizer step and
every collective of the training-type plugin) and notes when it entered the current one; that is
two attribute stores per collective, nothing more on the hot path. A watchdog thread per rank:

- raises the alarm when its own rank has waited in one collective longer than the timeout, by
  writing ``alarm`` in the rendezvous store (a separate connection, so it works while the
  process group is stuck);
- looks for the alarm in the store once per tick; when it is there, it answers with its position
  (collectives entered, waiting or not), dumps the Python stack of every thread with faulthandler
  to stderr and hands a :class:`StallReport` to the rank's handler, which ends the rank.

A rank that is outside every collective when the alarm comes never arrived: the rank that raised
the alarm names it, and the launcher makes it the root cause of the report. The process-group
timeout is set somewhat longer than the stall timeout, as a backstop for collectives ddpkit does
not see (``torch.distributed`` calls in user code).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ddpkit._runtime.ranks._errorfile import write_error_file
from ddpkit._runtime.ranks._names import ENV_ERROR_FILE

#: how often the watchdog looks at its rank and at the store, at most
MAX_TICK_SECONDS = 0.5
#: how long the rank that raised the alarm waits for the others' answers
ANSWER_SECONDS = 2.0


@dataclass(frozen=True)
class StallReport:
    """What one rank says when the stall alarm is raised."""

    rank: int
    #: True when this rank was outside every collective: it is one the others waited for
    never_arrived: bool
    #: one phrase for the report line of this rank
    note: str
    #: the Python stack of every thread of this rank (faulthandler)
    stack: str


def stack_of_all_threads() -> str:
    """The Python stack of every thread, as faulthandler writes it (it needs a real file)."""
    with tempfile.TemporaryFile(mode="w+") as fh:  # anonymous: nothing left behind
        faulthandler.dump_traceback(fh, all_threads=True)
        fh.seek(0)
        return fh.read()


def end_rank_on_stall(report: StallReport) -> None:
    """The default handler: leave the report for the launcher (when it gave an error file), then
    end this process; it cannot unwind a main thread stuck in a C call or a loop."""
    path = os.environ.get(ENV_ERROR_FILE)
    if path:
        write_error_file(
            path, report.stack, kind="stall", note=report.note, never_arrived=report.never_arrived
        )
    sys.stderr.flush()
    os._exit(1)


def _no_store() -> Any:
    raise RuntimeError("the stall watchdog has stopped")


class StallWatchdog:
    """Detects a stalled rank; see the module docstring.

    ``store`` makes the watchdog's own connection to the rendezvous store; ``prefix`` keeps the
    keys of each stage apart. ``on_stall`` gets this rank's report and must end the rank.
    """

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        timeout: float,
        store: Callable[[], Any],
        prefix: str,
        on_stall: Callable[[StallReport], None] | None = None,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.timeout = timeout
        self.tick = min(MAX_TICK_SECONDS, max(timeout / 4, 0.05))
        self._make_store = store
        self._prefix = prefix
        self._on_stall = on_stall or end_rank_on_stall
        # Written by the main thread only, read by the watchdog.
        self.arrivals = 0
        self._where = "start"
        self._since: float | None = None
        self._changed = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the main thread's side: two stores per collective ---------------------------------------

    @contextmanager
    def collective(self, where: str) -> Iterator[None]:
        """Wrap one collective: the watchdog knows this rank is waiting in it."""
        self.arrivals += 1
        self._where = where
        self._since = self._changed = time.monotonic()
        try:
            yield
        finally:
            self._since = None
            self._changed = time.monotonic()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ddpkit-stall-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None
        # Let go of the store now: on rank 0 it is the store's server, which must not outlive
        # the stage (a rank starting a stage rank 0 never joins is told by the bare socket).
        self._make_store = _no_store

    # -- the watchdog thread ----------------------------------------------------------------------

    def _key(self, name: str) -> str:
        return f"{self._prefix}{name}"

    def _run(self) -> None:
        try:
            store = self._make_store()
        except (RuntimeError, OSError):
            return  # no store to talk through: the process-group timeout remains the backstop
        try:
            self._watch(store)
        except (RuntimeError, OSError):
            # The store is gone: rank 0 ended, and its launcher (or the parent-death signal, or
            # the peer's closed socket) is ending this rank. Nothing left to watch.
            return

    def _watch(self, store: Any) -> None:
        alarm = self._key("alarm")
        while not self._stop.wait(self.tick):
            since = self._since
            if since is not None and time.monotonic() - since > self.timeout:
                value = f"{self.rank} {self.arrivals} {self._where}"
                store.compare_set(alarm, "", value)  # the first rank to see the stall wins
            elif not store.check([alarm]):
                continue
            self._answer(store, store.get(alarm).decode())
            return

    def _answer(self, store: Any, alarm: str) -> None:
        if self._stop.is_set():
            return  # the stage ended while the alarm went round
        arrivals, since, where = self.arrivals, self._since, self._where
        waiting = since is not None
        store.set(self._key(f"rank{self.rank}"), f"{arrivals} {int(waiting)}")
        stack = stack_of_all_threads()
        alarm_rank, _, rest = alarm.partition(" ")
        alarm_arrivals, _, alarm_where = rest.partition(" ")
        if int(alarm_rank) == self.rank:
            behind = self._ranks_behind(store)
            who = ", ".join(str(r) for r in behind) if behind else "unknown"
            note = (
                f"waited {time.monotonic() - (since or 0):.1f} s in {where} (collective "
                f"#{arrivals}) for rank(s) {who}, which never arrived "
                f"(stall timeout {self.timeout:g} s)"
            )
        elif waiting:
            note = (
                f"was waiting in {where} (collective #{arrivals}) when rank {alarm_rank} had "
                f"waited {self.timeout:g} s in {alarm_where} (collective #{alarm_arrivals})"
            )
        else:
            idle = time.monotonic() - self._changed
            note = (
                f"never arrived at {alarm_where} (collective #{alarm_arrivals}): it left "
                f"collective #{arrivals} ({where}) {idle:.1f} s before and has not entered "
                f"another; rank {alarm_rank} waited {self.timeout:g} s for it"
            )
        report = StallReport(rank=self.rank, never_arrived=not waiting, note=note, stack=stack)
        sys.stderr.write(f"ddpkit: stall: rank {self.rank} (pid {os.getpid()}) {note}.\n")
        sys.stderr.write(f"ddpkit: the stack of every thread of rank {self.rank}:\n{stack}\n")
        sys.stderr.flush()
        self._on_stall(report)

    def _ranks_behind(self, store: Any) -> list[int]:
        """The ranks outside every collective, or that did not answer (stuck holding the GIL)."""
        keys = {r: self._key(f"rank{r}") for r in range(self.world_size) if r != self.rank}
        deadline = time.monotonic() + ANSWER_SECONDS
        while time.monotonic() < deadline and not store.check(list(keys.values())):
            time.sleep(0.05)
        # An answer is "<collectives entered> <waiting: 1 or 0>".
        return [
            r
            for r, key in keys.items()
            if not store.check([key]) or store.get(key).decode().split()[1] == "0"
        ]
