"""A rank never outlives the process that launched it.

Two layers: the Linux parent-death signal (``PR_SET_PDEATHSIG``: the kernel sends SIGTERM the
moment the parent dies), and a watcher thread in the rank that polls ``os.getppid()`` and
SIGKILLs the rank shortly after the parent is gone. The second catches what the first cannot: a
rank whose own SIGTERM handler does not exit, a platform without ``prctl``, and a parent whose
launching thread (not process) ended, which the kernel also treats as a parent death.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
#: how often the watcher thread looks for its parent
ORPHAN_POLL_SECONDS = 0.25
#: after the parent is gone, how long a rank's own SIGTERM handling may take before SIGKILL
ORPHAN_GRACE_SECONDS = 1.0


def _prctl() -> Callable[..., int] | None:
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):  # not Linux: watch_parent still applies
        return None


def die_with_parent(
    parent_pid: int,
    prctl: Callable[..., int] | None = None,
    *,
    death_signal: int = signal.SIGTERM,
) -> None:
    """In the rank (before exec, or first thing after start): ask the kernel for
    ``death_signal`` when the parent dies; exit at once if it already has. A rank gets SIGTERM
    (its handlers may end it cleanly); an isolated test's process and the warm-start zygote,
    whose parent is the pytest that reports them, get SIGKILL."""
    prctl = prctl or _prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, death_signal)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def preexec_for_rank(
    parent_pid: int, *, own_group: bool = True, death_signal: int = signal.SIGTERM
) -> Callable[[], None]:
    """The ``preexec_fn`` of a process started with ``subprocess.Popen`` (and the first call of a
    rank that ``multiprocessing`` started): its own process group (``own_group``: the terminal's
    Ctrl-C reaches the launcher only, which forwards it; ending the group also ends the rank's
    own children, such as data-loader workers; a process started in a session of its own leads
    its group already) and death with the parent.

    libc is looked up here, in the parent: between fork and exec only the call itself runs."""
    prctl = _prctl()

    def hook() -> None:
        if own_group:
            os.setpgid(0, 0)
        die_with_parent(parent_pid, prctl, death_signal=death_signal)

    return hook


_watching: set[int] = set()
_watching_lock = threading.Lock()


def watch_parent(parent_pid: int) -> None:
    """Start (once per process) a daemon thread that ends this rank when ``parent_pid`` is no
    longer its parent."""
    with _watching_lock:
        if parent_pid in _watching:
            return
        _watching.add(parent_pid)
    thread = threading.Thread(
        target=_watch, args=(parent_pid,), name="ddpkit-parent-watch", daemon=True
    )
    thread.start()


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(ORPHAN_POLL_SECONDS)
    # The parent is gone: nobody supervises this rank any more. The parent-death SIGTERM has
    # normally ended it already; give a SIGTERM handler of the user's a moment, then end it.
    time.sleep(ORPHAN_GRACE_SECONDS)
    os.kill(os.getpid(), signal.SIGKILL)
