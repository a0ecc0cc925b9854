"""Unwinding the thread that runs a stage, from the supervisor's thread.

When a child fails, rank zero's stage is usually waiting in a collective that will fail too, but
only once the dead rank's sockets close, and a stage in pure Python (a loop over batches) would
go on. The supervisor raises :class:`StageAbort` in the stage's thread
(``PyThreadState_SetAsyncExc``), which lands at the next bytecode; ``launch`` then replaces it
with the real report. A C call that never returns cannot be unwound: :meth:`interrupt` says so,
and the supervisor ends the process.
"""

from __future__ import annotations

import ctypes
import threading
import time

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = [ctypes.c_ulong, ctypes.py_object]
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_POLL_SECONDS = 0.05


class StageAbort(BaseException):
    """Raised in the stage's thread once the job has failed or was interrupted; ``launch``
    replaces it with the real error. A BaseException, so that the user's ``except Exception``
    does not swallow it."""


class StageInterrupter:
    """Knows which thread runs a stage (armed while it does) and can unwind it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tid: int | None = None
        self._pending = False

    @property
    def armed(self) -> bool:
        return self._tid is not None

    def arm(self) -> None:
        """Called by the stage's thread as the stage starts."""
        with self._lock:
            self._tid = threading.get_ident()

    def disarm(self) -> None:
        """Called by the stage's thread as the stage ends (twice is harmless): an abort that
        has not landed yet is withdrawn, so it cannot hit the code after the stage."""
        with self._lock:
            tid, self._tid = self._tid, None
            if self._pending and tid is not None:
                _clear_async_exc(tid, None)
            self._pending = False

    def interrupt(self, grace: float) -> bool:
        """Unwind the stage's thread; True when it left the stage within ``grace`` seconds (or
        no stage was running), False when it is stuck in a call that cannot be interrupted."""
        with self._lock:
            if self._tid is None:
                return True
            _set_async_exc(self._tid, StageAbort)
            self._pending = True
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not self.armed:
                return True
            time.sleep(_POLL_SECONDS)
        return False
