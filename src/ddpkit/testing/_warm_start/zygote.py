"""The warm start: a zygote process that imports torch (and the installed libraries the tests
import) once per pytest session and forks one clean process per rank per test.

::

    parent pytest                                   zygote (python -c BOOT)
      Zygote.start(names, env)   --- starts --->     preloads (preload.py), checks
                                                     that a fork is safe, gc.freeze()
                                 <--- ready -----    what it preloaded, left, read, or why a
                                                     fork is unsafe
      zygote.extend(names)       --- preload --->    the same, for more modules
                                 <--- ready -----
      zygote.fork(ForkRequest)   --- request --->    fork(): the child runs the test
                (+ descriptors)                      (forked.run_forked)
                                 <--- started ---    its pid
                                 <--- exit ------    its exit status, once it is reaped
      zygote.close()             --- EOF ------->    SIGKILL to what still runs, exit

The two talk over a ``SOCK_SEQPACKET`` socket pair (one JSON message a packet; descriptors ride
along as ``SCM_RIGHTS``). The zygote dies with the parent (parent-death signal, and the socket's
EOF); each forked process leads a session of its own and dies with the zygote. Nothing of a test
runs in the zygote: it only imports, forks and reaps, so every fork starts from the same clean
state and the crash of one never reaches it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ddpkit._runtime.process.proc import ForkedChild, start_popen
from ddpkit._runtime.ranks._names import ENV_ZYGOTE_FD, ENV_ZYGOTE_PRELOAD
from ddpkit._runtime.ranks._scratch import make_private_dir
from ddpkit.testing._supervise import tail
from ddpkit.testing._warm_start.forked import ForkRequest
from ddpkit.testing._warm_start.preload import Preloaded
from ddpkit.testing._warm_start.zygote_server import MAX_MESSAGE

#: The zygote's command line is ``python -c BOOT``: the leak checks know it by this. It holds
#: OpenBLAS's thread pools before its first import (:mod:`fresh_state`).
BOOT = (
    "import ddpkit.testing._warm_start.fresh_state as fresh; fresh.hold(); "
    "import ddpkit.testing._warm_start.zygote_server as server; server.main()"
)


class ZygoteError(Exception):
    """The zygote could not start, or died."""


#: The zygote process, seen from the parent: a ``subprocess.Popen`` (``python -c BOOT``), or a
#: fork of the parent itself (:mod:`~ddpkit.testing._warm_start.session_fork`).
ZygoteProcess = subprocess.Popen[bytes] | ForkedChild


class ForkedProcess(ForkedChild):
    """A test process the zygote forked, seen from the parent (``Popen``'s interface): the
    zygote reaps it and tells its exit status."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        super().__init__(pid)
        self._zygote = zygote

    def poll(self) -> int | None:
        if self.returncode is None:
            self._zygote.pump(0)
            self.returncode = self._zygote.exit_code(self.pid)
        return self.returncode


class Zygote:
    """The parent's handle on the zygote process."""

    def __init__(
        self,
        proc: ZygoteProcess,
        sock: socket.socket,
        directory: Path,
        env: Mapping[str, str],
    ) -> None:
        self.proc = proc
        self.sock = sock
        self.directory = directory
        self.env = env
        """The environment it was started with: what its preloads saw."""
        self.info: Preloaded | None = None
        self._started: dict[int, int] = {}
        self._exits: dict[int, int] = {}
        self._ids = itertools.count()
        self._closed = False
        self._loads_asked = 1  # the list it was started with
        self._loads_done = 0

    @classmethod
    def start(cls, names: Sequence[str], env: Mapping[str, str], cwd: Path) -> Zygote:
        """Start a zygote that preloads ``names`` with ``env``; :meth:`ready` waits for it."""
        # 0700, named for this process: if it is SIGKILLed, the next launch's sweep removes it.
        directory = make_private_dir()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_MESSAGE)
            (directory / "preload.json").write_text(json.dumps(list(names)))
            child_env = dict(env)
            child_env[ENV_ZYGOTE_FD] = str(theirs.fileno())
            child_env[ENV_ZYGOTE_PRELOAD] = str(directory / "preload.json")
            # SIGKILL when this pytest dies. The death signal follows the thread that started
            # the process: from any thread but the main one it would end the zygote with that
            # thread, so there it gets none (0).
            on_main = threading.current_thread() is threading.main_thread()
            proc = start_popen(
                [sys.executable, "-c", BOOT],
                child_env,
                log=directory / "zygote.log",
                cwd=cwd,
                pass_fds=(theirs.fileno(),),
                new_session=True,
                death_signal=signal.SIGKILL if on_main else 0,
            )
        except BaseException:
            ours.close()
            shutil.rmtree(directory, ignore_errors=True)
            raise
        finally:
            theirs.close()
        return cls(proc, ours, directory, dict(env))

    # -- what the zygote says ---------------------------------------------------------------------

    def _dispatch(self, message: Mapping[str, Any]) -> None:
        if "ready" in message:
            self._loads_done += 1
            ready = message["ready"]
            self.info = Preloaded(**{**ready, "reads": set(ready["reads"])})
        elif "started" in message:
            self._started[int(message["started"])] = int(message["pid"])
        elif "exit" in message:
            self._exits[int(message["exit"])] = int(message["code"])

    def _lost(self) -> None:
        """The zygote is gone: every process it forked died with it (SIGKILL)."""
        self._closed = True
        self.sock.close()  # a second close does nothing
        for pid in self._started.values():
            self._exits.setdefault(pid, -signal.SIGKILL)

    def pump(self, timeout: float) -> None:
        """Read what the zygote said, waiting up to ``timeout`` seconds for its first message."""
        if self._closed:
            time.sleep(max(0.0, timeout))
            return
        wait = timeout
        while True:
            try:
                readable, _, _ = select.select([self.sock], [], [], wait)
                if not readable:
                    return
                raw = self.sock.recv(MAX_MESSAGE)
            except OSError:
                raw = b""
            if not raw:
                self._lost()
                return
            self._dispatch(json.loads(raw))
            wait = 0

    @property
    def alive(self) -> bool:
        return not self._closed and self.proc.poll() is None

    def exit_code(self, pid: int) -> int | None:
        return self._exits.get(pid)

    def extend(self, names: Sequence[str]) -> None:
        """Have the zygote preload more modules (those the collection imported, after a start
        with a few while it ran); :meth:`ready` waits for them too."""
        try:
            self.sock.send(json.dumps({"preload": list(names)}).encode())
        except OSError:
            self._lost()
            return
        self._loads_asked += 1

    def ready(self, timeout: float) -> Preloaded:
        """Wait until the zygote has preloaded; :class:`ZygoteError` if it cannot."""
        deadline = time.monotonic() + timeout
        while self.info is None or self._loads_done < self._loads_asked:
            if not self.alive:
                raise ZygoteError(self._death())
            if time.monotonic() >= deadline:
                self.close()
                raise ZygoteError(f"the zygote was not ready after {timeout:g} s")
            self.pump(0.05)
        return self.info

    def _death(self) -> str:
        code = self.proc.poll()
        last = tail(self.directory / "zygote.log", lines=3).strip().replace("\n", " | ")
        how = "it closed its socket" if code is None else f"it exited with code {code}"
        return f"the zygote ended ({how})" + (f": {last}" if last else "")

    def fork(self, request: ForkRequest, fds: Sequence[int] = ()) -> ForkedProcess:
        """Fork a test process; returns once the zygote says it started."""
        if not self.alive:
            raise ZygoteError(self._death())
        ident = next(self._ids)
        payload = json.dumps({"fork": ident, "request": dataclasses.asdict(request)}).encode()
        try:
            socket.send_fds(self.sock, [payload], list(fds))
        except OSError as err:
            self._lost()
            raise ZygoteError(f"the zygote took no request: {err}") from err
        while ident not in self._started:
            if not self.alive:
                raise ZygoteError(self._death())
            self.pump(0.05)
        return ForkedProcess(self, self._started[ident])

    def close(self) -> None:
        """End the zygote (it SIGKILLs whatever it forked that still runs) and remove its
        files."""
        self._closed = True
        self.sock.close()  # a second close does nothing
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
