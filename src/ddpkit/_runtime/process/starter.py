"""Ranks are started from one thread that lives as long as the process.

A rank asks the kernel for a signal when its parent dies (``PR_SET_PDEATHSIG``, see
:mod:`ddpkit._runtime.ranks._lifeline`), and Linux means by "parent" the *thread* that forked it. A
rank forked by a worker thread would therefore be ended the moment that thread returns, even though
the launching process lives on (a ``fit`` run from a worker thread, then a second ``fit`` from
another thread, would find its ranks killed). So every launcher forks from this one daemon thread,
which ends only with the process.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _serve() -> None:
    while True:
        fn, reply = _requests.get()
        try:
            reply.set_result(fn())
        except BaseException as exc:
            reply.set_exception(exc)


def start_in_lifetime_thread(fn: Callable[[], T]) -> T:
    """Run ``fn`` (which starts processes) in the process's lifetime thread; return what it
    returned, or raise what it raised."""
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="ddpkit-starter", daemon=True)
            _thread.start()
    reply: Future[T] = Future()
    _requests.put((fn, reply))
    return reply.result()
