"""The warm start's first choice: right after collection the parent pytest forks itself into the
session's zygote, and each process of an isolated test is a fork of that zygote which runs the
collected item itself. No interpreter starts, nothing is imported, no pytest session is
configured or collected again: a 2-rank test costs its forks, its process group and its body.

It is as good as a fresh ``python -m pytest <node id>`` because the fork comes before any test
ran in the parent (what the zygote holds is what collection imported, as a fresh session of the
same files would import it), each process is new, and what a fresh session would have of its
own is made anew in each: its output (the log the parent reads) and a ``tee-sys`` capture, as
the fresh interpreter is given; its tmp_path root (never the parent's ``--basetemp``, which
every rank would wipe); its faulthandler file; ddpkit's role as a test's process. The zygote
keeps none of the parent's terminal or output pipe open (whoever reads pytest's output sees it
end when pytest ends), and nothing of it returns into the parent's session: it serves until the
parent closes its socket, and exits.

Where a fork of the session cannot be that good, the zygote is a fresh interpreter that preloads
instead (:mod:`~ddpkit.testing._warm_start.zygote_server`), one line says why (:func:`why_not`),
and :class:`~ddpkit.testing._warm_start.warm.WarmStart` falls back to it: when a thread runs in
the parent, CUDA or a process group was initialised, a conftest, test module or plugin read a
per-test variable (``RANK``, ``LOCAL_RANK``, ``MASTER_PORT``, ``DDPKIT_*``, ...) while the
session started or collected (a test's own session would read its own value:
:func:`watch_environment`; the known readers of
:mod:`~ddpkit.testing._warm_start.import_readers`, Lightning's among them, are set again in each
test's process instead), the session is not the first of its process (pytester's in-process
runs), or collection ran off the main thread; later, for a test whose environment differs from
the parent's at the fork (a session fixture exported a variable), and after the session's
zygote died (the parent has run tests since: it is no longer what collection left).
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import socket
import stat
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import pytest

from ddpkit._runtime.process.proc import ForkedChild
from ddpkit._runtime.ranks._lifeline import die_with_parent
from ddpkit._runtime.ranks._scratch import make_private_dir
from ddpkit.testing import _leaks as leaks
from ddpkit.testing._warm_start import import_readers
from ddpkit.testing._warm_start.forked import ForkRequest, become_test_process, exit_now, stdio_to
from ddpkit.testing._warm_start.preload import (
    ReadEnviron,
    fork_hazard,
    is_per_test,
    native_threads,
)
from ddpkit.testing._warm_start.zygote import Zygote, ZygoteError
from ddpkit.testing._warm_start.zygote_server import MAX_MESSAGE, Server

#: What the plugin does in a test's process before the item runs: what its ``pytest_configure``
#: and collection hooks do in a test's own interpreter (ddpkit's child role, the timeout).
Prepare = Callable[[pytest.Config, pytest.Item], None]

# The threads this process runs once torch is imported (its pools are fork-safe): more of them
# at the fork means something started one since.
_BASELINE_THREADS = native_threads()
_FIRST_SESSION = pytest.StashKey[bool]()
_configured = 0


def note_configured(config: pytest.Config) -> None:
    """Called from the plugin's ``pytest_configure``: only the first session of a process may
    fork itself (a later one, e.g. pytester's in-process run, runs inside a test of another)."""
    global _configured
    _configured += 1
    config.stash[_FIRST_SESSION] = _configured == 1


# Readers whose reads of a per-test variable are not the test's: pytest (it sets
# PYTEST_CURRENT_TEST and reads it back at run time) and ddpkit, which reads its own variables to
# learn its role and makes that role anew in each test's process. (Lightning's rank_zero_only
# and torchmetrics' are read again in each test's process: import_readers.)
_OWN_READERS = frozenset({"ddpkit", "_pytest", "pytest", "pluggy"})


class _WatchedEnviron(ReadEnviron):
    """``os.environ`` while the parent session starts and collects: the first read of a per-test
    variable by anyone else is noted (module, variable)."""

    def __init__(self, real: Any) -> None:
        super().__init__(real)
        self.noted: tuple[str, str] | None = None

    def read(self, key: str) -> None:
        if self.noted is not None or not is_per_test(key):
            return
        reader = import_readers.reader_of()
        if reader.partition(".")[0] in _OWN_READERS or import_readers.is_known_read(reader, key):
            return
        self.noted = (reader, key)


_watched: _WatchedEnviron | None = None


def watch_environment() -> None:
    """From the plugin's import until the fork: note a read of a per-test variable. A module
    that took ``os.environ`` before (``from os import environ``) is not watched."""
    global _watched
    if _watched is None:
        _watched = _WatchedEnviron(os.environ)
        os.environ = _watched  # noqa: B003 (the same variables, reads noted)


def stop_watching() -> tuple[str, str] | None:
    """Put ``os.environ`` back; the (module, variable) of the read noted, if one was."""
    global _watched
    watched, _watched = _watched, None
    if watched is None:
        return None
    watched.active = False  # a module may keep a reference: it reads the same variables
    if os.environ is watched:
        os.environ = watched.real  # noqa: B003
    return watched.noted


def why_not(config: pytest.Config) -> str | None:
    """Why this pytest process cannot be forked into the zygote now, or None."""
    if not config.stash.get(_FIRST_SESSION, False):
        return "another pytest session ran in this process first"
    read = stop_watching()
    if read is not None:
        return f"{read[0]} read {read[1]} while the session collected (each test's own value)"
    if threading.current_thread() is not threading.main_thread():
        return "collection ran off the main thread"
    hazard = fork_hazard(_BASELINE_THREADS)
    return None if hazard is None else f"in this pytest process, {hazard}"


def fork_zygote(session: pytest.Session, prepare: Prepare, env: Mapping[str, str]) -> Zygote:
    """Fork this process into the session's zygote; :class:`ZygoteError` with :func:`why_not`'s
    reason when it cannot. ``env``: the environment it holds (``os.environ``, zygote-shaped)."""
    why = why_not(session.config)
    if why is not None:
        raise ZygoteError(why)
    items = {item.nodeid: item for item in session.items}
    directory = make_private_dir()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_MESSAGE)
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()  # else the zygote would write the parent's pending output again
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    if pid == 0:
        ours.close()
        _zygote(theirs, directory / "zygote.log", parent, session.config, items, prepare)
    theirs.close()
    leaks.note_helper(pid)
    return Zygote(ForkedChild(pid), ours, directory, dict(env))


def _zygote(
    sock: socket.socket,
    log: Path,
    parent: int,
    config: pytest.Config,
    items: Mapping[str, pytest.Item],
    prepare: Prepare,
) -> NoReturn:
    """The zygote: serve fork requests; a forked child runs its item. Never returns into the
    parent's session, whatever happens."""
    try:
        os.setsid()
        die_with_parent(parent, death_signal=signal.SIGKILL)
        _release_parent_output(keep=sock.fileno())
        _fresh_capture(config)
        stdio_to(str(log))
        server = Server(sock)
        server.ready(whole_env=True)
        request, fds, zygote = server.serve()
    except BaseException:
        traceback.print_exc()
        os._exit(70)
    _run_item(request, fds, zygote, items, prepare)


def _release_parent_output(keep: int) -> None:
    """Point every inherited terminal, pipe and socket descriptor (the parent's output, the
    copies pytest's capture and faulthandler keep of it) at /dev/null. The numbers stay valid, so
    that no object that owns one closes a descriptor reused for something else."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd in (null, keep) or fd < 3:
                continue
            try:
                mode = os.fstat(fd).st_mode
            except OSError:
                continue  # the listing's own descriptor, closed by now
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode):
                os.dup2(null, fd)
    finally:
        os.close(null)


def _fresh_capture(config: pytest.Config) -> None:
    """Replace the parent's capture manager by one that captures as a test's own interpreter
    does (``--capture=tee-sys``: into the reports, and through to the process's log). The
    parent's capture files are the parent's: they are never read, truncated or stopped here."""
    from _pytest.capture import CaptureManager

    plugins = config.pluginmanager
    old = plugins.get_plugin("capturemanager")
    if old is not None:
        plugins.unregister(old)
        plugins.register(CaptureManager("tee-sys"), "capturemanager")


def _fresh_tmp_path_root(config: pytest.Config) -> None:
    """tmp_path under this process's ``PYTEST_DEBUG_TEMPROOT``, as in a test's own interpreter,
    which is not given the parent's ``--basetemp`` (each rank would wipe it)."""
    from _pytest.tmpdir import TempPathFactory

    if getattr(config, "_tmp_path_factory", None) is None:
        return
    config.option.basetemp = None
    config._tmp_path_factory = TempPathFactory.from_config(  # type: ignore[attr-defined]
        config, _ispytest=True
    )


def _run_item(
    request: ForkRequest,
    fds: list[int],
    zygote: int,
    items: Mapping[str, pytest.Item],
    prepare: Prepare,
) -> NoReturn:
    """A test's process forked from the session's zygote: run the item, exit 1 if it failed."""
    code = 1
    try:
        become_test_process(request, fds, zygote)
        item = items[request.nodeid]
        config = item.config
        if faulthandler.is_enabled():
            faulthandler.enable(file=sys.stderr, all_threads=True)
        _fresh_tmp_path_root(config)
        prepare(config, item)  # before the capture: its stack dump goes to the log's descriptor
        capture = config.pluginmanager.get_plugin("capturemanager")
        if capture is not None:
            capture.start_global_capturing()
        failed_before = item.session.testsfailed
        item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
        code = int(item.session.testsfailed > failed_before)
        if capture is not None:
            capture.stop_global_capturing()
    except BaseException:
        traceback.print_exc()
    exit_now(code)
