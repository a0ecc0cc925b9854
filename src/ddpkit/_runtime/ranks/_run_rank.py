"""A rank of ``ddpkit run``: the user's script (or module) run as ``__main__``, under the rank's
side of ddpkit's launcher protocol.

``ddpkit run`` starts each rank as ``python -u -m ddpkit._runtime.ranks._run_rank [-m] TARGET
ARGS``; this module then runs TARGET exactly as ``python -u TARGET ARGS`` would (``sys.argv``,
``sys.path[0]``, ``__main__``: :mod:`runpy`), after three things torchrun does not do:

- the rank ends with its parent (:func:`~ddpkit._runtime.ranks._lifeline.watch_parent`; the parent
  also set the parent-death signal before exec);
- an exception that ends the script leaves its traceback in the rank's error file (the parent
  shows the root cause's, first, and the rank does not print it a second time); the script
  still ends with it (exit status 1), as it would alone;
- a collective that waits longer than the stall timeout (``DDPKIT_RUN_STALL_TIMEOUT``) raises
  ddpkit's stall alarm (:mod:`ddpkit._runtime.ranks._stall`): every rank dumps the stack of each
  thread, and the parent names the rank that never arrived. A raw script's collectives are seen by
  sampling the main thread: its innermost frame is in ``torch/distributed/`` while it waits.
"""

from __future__ import annotations

import datetime
import os
import runpy
import sys
import threading
import traceback
from types import FrameType, TracebackType
from typing import Any

from ddpkit._runtime.ranks._clean_exit import end_after_exit_handlers
from ddpkit._runtime.ranks._errorfile import report_rank_failure, write_error_file
from ddpkit._runtime.ranks._lifeline import watch_parent
from ddpkit._runtime.ranks._names import ENV_ERROR_FILE, ENV_PARENT_PID

#: the stall timeout in seconds ``ddpkit run`` gives its ranks ("0": no stall watch)
ENV_STALL_TIMEOUT = "DDPKIT_RUN_STALL_TIMEOUT"
#: how often the main thread is sampled
_SAMPLE_SECONDS = 0.1
#: how long the end of the script waits for the sampler and its watchdog to stop
_STOP_SECONDS = 5.0
_DISTRIBUTED = os.sep + os.path.join("torch", "distributed") + os.sep


def _report(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> bool:
    """Leave the traceback for the parent; True when it is in (the parent's report shows it)."""
    path = os.environ.get(ENV_ERROR_FILE)
    if not path or isinstance(value, SystemExit | KeyboardInterrupt):
        return False
    if "torch" in sys.modules:
        return report_rank_failure(path, value)  # tells a lost peer from a root cause
    # No torch loaded: no collective, so no lost peer (and no second spent importing torch).
    lines = str(value).strip().splitlines()
    summary = f"{kind.__name__}: {lines[0][:300]}" if lines else kind.__name__
    try:
        write_error_file(path, "".join(traceback.format_exception(value)), summary=summary)
    except OSError:
        return False
    return True


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the user's code on: without this module's and runpy's frames."""
    ours = (__file__, runpy.__file__)
    while tb is not None and (
        tb.tb_frame.f_code.co_filename in ours
        or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")
    ):
        tb = tb.tb_next
    return tb


def _in_collective(frame: FrameType | None) -> str | None:
    """The torch.distributed function the main thread waits in (its innermost frame), if any."""
    if frame is not None and _DISTRIBUTED in frame.f_code.co_filename:
        return frame.f_code.co_name
    return None


class CollectiveSampler:
    """Drives a :class:`~ddpkit._runtime.ranks._stall.StallWatchdog` for a script ddpkit does not
    wrap: the main thread's position, sampled, stands for the collectives the watchdog counts.

    :meth:`stop` ends both threads, and must run before the interpreter finalizes: a daemon
    thread that is inside a ``TCPStore`` call then is ended by ``pthread_exit`` through torch's
    C++ frames, and the rank aborts ("terminate called without an active exception", SIGABRT)
    after a script that ended well.
    """

    def __init__(self, timeout: float, main: threading.Thread) -> None:
        self.timeout = timeout
        self.main = main
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ddpkit-run-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the sampling and the watchdog, and wait for both: at most :data:`_STOP_SECONDS`,
        which only a watchdog still connecting to a store that does not answer takes."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(_STOP_SECONDS)
            self._thread = None

    def _running(self) -> bool:
        return self.main.is_alive() and not self._done.is_set()

    def _run(self) -> None:
        watchdog = self._wait_for_process_group()
        if watchdog is None:
            return
        watchdog.start()
        try:
            self._sample(watchdog)
        finally:
            watchdog.stop()  # joins its thread: no store call of it outlives the script

    def _sample(self, watchdog: Any) -> None:
        inside: Any = None
        while self._running():
            where = _in_collective(sys._current_frames().get(self.main.ident or -1))
            if where is not None and inside is None:
                inside = watchdog.collective(where)
                inside.__enter__()
            elif where is None and inside is not None:
                inside.__exit__(None, None, None)
                inside = None
            self._done.wait(_SAMPLE_SECONDS)

    def _wait_for_process_group(self) -> Any:
        """The watchdog, once the script has a process group (None: it never made one)."""
        while self._running():
            dist = sys.modules.get("torch.distributed")
            if dist is not None and dist.is_available() and dist.is_initialized():
                break
            self._done.wait(_SAMPLE_SECONDS * 5)
        else:
            return None
        from ddpkit._runtime.ranks._stall import StallWatchdog

        env = os.environ
        attempt = env.get("TORCHELASTIC_RESTART_COUNT", "0")
        address, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
        return StallWatchdog(
            rank=int(env["RANK"]),
            world_size=int(env["WORLD_SIZE"]),
            timeout=self.timeout,
            store=lambda: dist.TCPStore(
                address, port, is_master=False, timeout=datetime.timedelta(seconds=30)
            ),
            prefix=f"ddpkit/run/attempt{attempt}/",
        )


def main(argv: list[str] | None = None) -> None:
    """``[-m] TARGET ARGS``: run TARGET as ``__main__`` with ``sys.argv = [TARGET, *ARGS]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_module = bool(args) and args[0] == "-m"
    target, rest = (args[1], args[2:]) if as_module else (args[0], args[1:])
    parent = os.environ.get(ENV_PARENT_PID, "")
    if parent.isdecimal():
        watch_parent(int(parent))
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        tb = _user_frames(tb)
        if _report(kind, value.with_traceback(tb), tb):
            end_after_exit_handlers()  # the parent's report shows it, once
        else:
            previous(kind, value, tb)

    sys.excepthook = hook
    stall = float(os.environ.get(ENV_STALL_TIMEOUT, "0") or 0)
    sampler = CollectiveSampler(stall, threading.main_thread()) if stall > 0 else None
    if sampler is not None:
        sampler.start()
    sys.argv = [target, *rest]
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    finally:
        if sampler is not None:
            sampler.stop()  # before the script's atexit handlers and the interpreter's end


if __name__ == "__main__":
    main()
