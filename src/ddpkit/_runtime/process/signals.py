"""SIGINT and SIGTERM while a launcher supervises ranks: the handler only sets a flag.

The handler does no collective and no I/O (a collective in a handler deadlocks a stalled job;
I/O in a handler can re-enter a half-done write). It records the signal; the supervisor acts on it
outside the handler: it ends every rank (SIGTERM, then SIGKILL after a grace period) and then the
launcher raises ``KeyboardInterrupt`` (SIGINT: the process ends with status 130 in a shell) or
``SystemExit(143)`` (SIGTERM).

Python runs a signal's handler in the main thread only, and only between bytecodes: a main thread
blocked in a C call (a gloo collective) would not see it. The C-level handler also writes the
signal number to a wakeup pipe (``signal.set_wakeup_fd``), which a supervisor thread waits on, so
it learns of the signal at once whatever the main thread is doing.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

#: the signals a supervising launcher forwards to its ranks
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_exception(signum: int) -> BaseException:
    """What the launching process raises once its ranks have ended after ``signum``."""
    if signum == signal.SIGINT:
        return KeyboardInterrupt()
    return SystemExit(128 + signum)


class SignalFlag:
    """While entered (in the main thread): SIGINT/SIGTERM set :attr:`signum` and wake
    :meth:`wait`; nothing else happens. The previous handlers and wakeup fd come back on exit.

    Entered from another thread, it installs nothing (Python allows handlers in the main thread
    only) and the process keeps its usual signal behaviour.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._previous: dict[int, Any] = {}
        self._previous_wakeup_fd = -1
        self._installed = False
        self._depth = 0
        self._closed = False

    # -- the handler: a flag, nothing else ------------------------------------------------------

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum

    # -- install / restore ----------------------------------------------------------------------

    def __enter__(self) -> SignalFlag:
        self._depth += 1
        if self._depth > 1 or threading.current_thread() is not threading.main_thread():
            return self
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        self._previous_wakeup_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth > 0 or not self._installed:
            return
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()
        self._installed = False

    @property
    def installed(self) -> bool:
        return self._installed

    # -- the supervisor's side ------------------------------------------------------------------

    def wait(self, timeout: float) -> int | None:
        """Sleep up to ``timeout`` seconds, waking at once on a signal; the signal seen so far
        (None where the handler is not in: the process keeps its usual signal behaviour)."""
        if not self._closed:
            ready, _, _ = select.select([self._read_fd], [], [], timeout)
            with contextlib.suppress(BlockingIOError):
                data = os.read(self._read_fd, 512) if ready else b""
                first = next((b for b in data if b in SIGNALS), None)
                if first is not None and self.signum is None:  # the first signal stands
                    self.signum = first
        return self.signum if self._installed else None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._read_fd)
            os.close(self._write_fd)
