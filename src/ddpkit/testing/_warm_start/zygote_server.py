"""The zygote's own side of the warm start: the loop that preloads, forks on request, reaps and
reports; and the zygote process that ``python -c BOOT`` starts (:func:`main`).

A zygote is either that fresh interpreter, which imports what the parent asked for
(:mod:`~ddpkit.testing._warm_start.preload`) and forks ranks that each run ``pytest <node id>``,
or a fork of the parent pytest itself after collection
(:mod:`~ddpkit.testing._warm_start.session_fork`), whose ranks run the collected item. Both
speak the protocol of :mod:`~ddpkit.testing._warm_start.zygote` through :class:`Server`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import select
import signal
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from ddpkit._runtime.ranks._names import ENV_ZYGOTE_FD, ENV_ZYGOTE_PRELOAD
from ddpkit.testing._warm_start.forked import ForkRequest, run_forked
from ddpkit.testing._warm_start.preload import Preloaded, preload

MAX_MESSAGE = 1 << 20
MAX_FDS = 8


class Server:
    """The zygote's loop: fork on request, reap on SIGCHLD, end on EOF."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.result = Preloaded()
        self.children: set[int] = set()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def send(self, message: Mapping[str, Any]) -> None:
        try:
            self.sock.send(json.dumps(message).encode())
        except OSError:
            self.shutdown()

    def load(self, names: Sequence[str]) -> None:
        """Preload ``names`` and say what this zygote now holds (or why it cannot fork)."""
        preload(names, into=self.result)
        self.ready()

    def ready(self, *, whole_env: bool = False) -> None:
        """Say what this zygote holds. ``whole_env``: its modules were imported by the parent
        pytest, which recorded no variable reads: a test whose environment differs from the
        zygote's in any variable (but the per-test ones) needs another zygote."""
        # Frozen objects are left alone by every later collection: the forks' collections
        # stay small and do not write to (and so copy) the zygote's pages.
        gc.collect()
        gc.freeze()
        result = self.result
        result.whole_env = whole_env
        self.send({"ready": {**dataclasses.asdict(result), "reads": sorted(result.reads)}})
        if result.hazard is not None:
            self.shutdown()  # the parent will not fork from here

    def serve(self) -> tuple[ForkRequest, list[int], int]:
        """Serve until the parent closes the socket. Returns only in a forked child: the
        request, its descriptors and the zygote's pid."""
        while True:
            readable = select.select([self.sock.fileno(), self.wake_r], [], [])[0]
            if self.wake_r in readable:
                os.read(self.wake_r, 4096)
            self.reap()
            if self.sock.fileno() not in readable:
                continue
            try:
                raw, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, MAX_FDS)
            except OSError:
                raw, fds = b"", []
            if not raw:
                self.shutdown()
            message = json.loads(raw)
            if "preload" in message:
                self.load(message["preload"])
                continue
            request = ForkRequest.from_message(message["request"])
            zygote = os.getpid()
            pid = os.fork()
            if pid == 0:
                self._become_child()
                return request, fds, zygote
            for fd in fds:
                os.close(fd)
            self.children.add(pid)
            self.send({"started": message["fork"], "pid": pid})

    def _become_child(self) -> None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(self.wake_r)
        os.close(self.wake_w)
        self.sock.close()

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self.send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})

    def shutdown(self) -> NoReturn:
        for pid in self.children:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)
        for pid in self.children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        os._exit(0)


def main() -> None:
    """The zygote process (``python -c BOOT``)."""
    sock = socket.socket(fileno=int(os.environ.pop(ENV_ZYGOTE_FD)))
    names = json.loads(Path(os.environ.pop(ENV_ZYGOTE_PRELOAD)).read_text())
    # torch before the preload (its pools are held by now), as the zygote's own imports did
    # until they became light: imported from inside the guarded preload instead, the zygote of a
    # suite that imports scikit-learn died of SIGSEGV (tests/testing/test_warm_start_blas.py).
    import torch
    import torch.distributed  # noqa: F401

    server = Server(sock)
    server.load(names)
    request, fds, zygote = server.serve()
    run_forked(request, fds, zygote)
