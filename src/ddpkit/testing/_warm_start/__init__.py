"""The warm start: how ddpkit's pytest plugin starts the processes of an isolated test
(``@pytest.mark.standalone``, ``@pytest.mark.distributed``) without an interpreter start and a
torch import per rank per test. Read top to bottom; each part names the module that does it.

**One zygote per session, two ways to have it.** Every process of an isolated test is forked
from a *zygote*: a process that holds what the tests import, and does nothing but fork on
request and reap.

1. *The session itself* (:mod:`.session_fork`), the first choice. Right after collection (the
   last ``pytest_collection_finish``) the parent pytest forks itself into the zygote, and each
   process of a test is a fork of it that runs the collected item: no interpreter starts,
   nothing is imported, no session is configured or collected again.
2. *A fresh interpreter* (:mod:`.zygote_server`, ``python -c BOOT``; its handle in the parent:
   :mod:`.zygote`), where the session cannot fork itself: a thread runs in it (every
   pytest-xdist worker has one), CUDA or a process group was initialised, a conftest, test
   module or plugin read a per-test variable (``RANK``, ``MASTER_PORT``, ``DDPKIT_*``, ...)
   while the session collected, another session ran in the process first (pytester), or
   collection ran off the main thread. One line says why. It starts when the session finds it
   cannot fork itself (in an xdist worker, as soon as collection meets a test file that marks
   a test: it imports torch while collection goes on), preloads what the collection imported,
   and each of its forks runs ``pytest <node id>``.

Both are kept: on 2 cores a session of ten 2-rank tests took 5.5 s forked from the session and
8.8 s from the fresh-interpreter zygote (``python -m bench.tests``, median of 3 rounds), and
the fresh-interpreter zygote is what a pytest-xdist worker has.

:class:`~.warm.WarmStart` holds the session's zygote and, before each test, chooses the one
that serves it: none for a test that asks for a fresh interpreter (``fresh_interpreter=True``,
``--ddpkit-fresh-interpreter``); a new fresh-interpreter zygote for a test whose environment
differs in a variable a preloaded module read (for the session's own fork: in any variable but
the per-test ones), and once the session's fork died; one without the module whose import made
a fork unsafe (``ddpkit: the warm start leaves <module> to each test: ...``); none for the rest
of the session when no zygote can start (one line says why; never a hang).

**What is preloaded** (:mod:`.preload`): every module the collection imported that belongs to
an installed distribution or to the standard library, torch first; never a test module, a
conftest, a helper next to the tests or a pytest plugin (pytest rewrites their asserts as it
imports them). A module that reads a per-test variable while it is imported is left to each
test, unless each test's process computes its value again (:mod:`.import_readers`: Lightning's
and torchmetrics' ``rank_zero_only.rank``); any other variable it read is recorded.

**Why a fork is safe.** A fork copies one thread, and the locks any other thread held stay held
in the child. So no zygote forks while a thread runs beyond those torch's import leaves, or
with CUDA or a process group initialised (:func:`.preload.fork_hazard`). OpenBLAS (numpy's,
scipy's) would start its thread pool when it loads: from the plugin's import until collection
ends, and in the fresh-interpreter zygote from its first line, the pools are *held*
(:mod:`.fresh_state`: ``OPENBLAS_NUM_THREADS=1`` in the C environment only, so an OpenBLAS that
loads then starts no thread), and each forked process releases them: threadpoolctl gives each
pool the size a fresh interpreter with that process's environment would have. Without
threadpoolctl nothing is held, and a module whose import starts a pool is left to each test.
After preloading, ``gc.freeze()`` keeps the forks' collections from copying the zygote's pages.

**A test's process, from start to end** (:mod:`.forked`). The parent sends the zygote a
:class:`~.forked.ForkRequest` (arguments, environment, working directory, log, descriptors such
as rank 0's store socket) over a socket pair; the zygote forks. The child leads a session of its
own and dies with the zygote; it takes the request's environment, directory, output and command
line (``sys.orig_argv`` is what a DDPPlugin re-runs), and makes anew what a fresh interpreter
computes from its environment (temp dir, random seeds, thread counts, the known readers). It
runs the test, then ends through :func:`~.forked.exit_now`: threads joined, atexit handlers run,
output flushed, and no teardown of the modules copied from the zygote. The zygote reaps it and
tells the parent its exit status; the parent (:mod:`ddpkit.testing._runner`) watches and ends it
as any process of a test. When the session ends it closes the zygote's socket: the zygote
SIGKILLs what still runs, and exits.

**The plugin's calls**, in a session's order: :func:`before_collection` (at its import),
:func:`configure`, ``WarmStart.early`` (a test file marks a test), :func:`after_collection`
(isolated tests will run) or :func:`end` (none will), ``WarmStart.zygote_for`` (the runner,
before each test), :func:`end`.

Names are imported on first use (PEP 562): the fresh-interpreter zygote imports this package
on its way to :mod:`.fresh_state`, which must hold the pools before anything imports torch.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

    from ddpkit.testing._warm_start.forked import ForkRequest as ForkRequest
    from ddpkit.testing._warm_start.forked import (
        ends_without_finalizing as ends_without_finalizing,
    )
    from ddpkit.testing._warm_start.session_fork import Prepare
    from ddpkit.testing._warm_start.warm import WarmStart as WarmStart
    from ddpkit.testing._warm_start.zygote import Zygote as Zygote
    from ddpkit.testing._warm_start.zygote import ZygoteError as ZygoteError

_HOMES = {
    "ForkRequest": "forked",
    "WarmStart": "warm",
    "Zygote": "zygote",
    "ZygoteError": "zygote",
    "ends_without_finalizing": "forked",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def before_collection() -> None:
    """At the plugin's import, in a session's process: from now until the collection ends, a
    read of a per-test variable by a conftest or test module is noted (the session must not
    fork itself then), and an OpenBLAS that collection loads starts no thread pool that would
    keep the session from forking (its pool is sized after the fork, here and in each fork)."""
    from ddpkit.testing._warm_start import fresh_state, session_fork

    session_fork.watch_environment()
    fresh_state.hold()


def configure(config: pytest.Config) -> WarmStart:
    """The session's warm start, from its ``pytest_configure``."""
    from ddpkit.testing._warm_start import fresh_state, session_fork, warm

    session_fork.note_configured(config)
    if hasattr(config, "workerinput"):
        session_fork.stop_watching()
    elif getattr(config.option, "dist", "no") != "no" and getattr(config.option, "tx", None):
        # pytest-xdist's controller: it forks nothing, and its workers (started before any
        # collection) would inherit the held variable.
        fresh_state.release()
    # A pytest-xdist worker talks to its controller from a thread: it cannot fork itself.
    fork_session = not hasattr(config, "workerinput")
    say = functools.partial(_say, config)
    return warm.WarmStart(config.invocation_params.dir, say, fork_session)


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:  # an xdist worker: its stderr reaches the terminal
        sys.stderr.write(line + os.linesep)
        sys.stderr.flush()
    else:
        reporter.write_line(line)


def after_collection(session: pytest.Session, warm: WarmStart, prepare: Prepare) -> None:
    """Isolated tests will run: the session forks itself into the zygote (``prepare``: what the
    plugin does in a test's process forked from it), or the fresh-interpreter zygote preloads
    what the collection imported. Then the tests run here (and in the forks) with the user's
    BLAS threads."""
    from ddpkit.testing._warm_start import preload, session_fork
    from ddpkit.testing._warm_start.warm import zygote_environment

    plugins = [p.__name__ for p in session.config.pluginmanager.get_plugins()
               if isinstance(p, types.ModuleType)]  # fmt: skip
    names = preload.candidates(dict(sys.modules), plugins)
    env = zygote_environment(os.environ)
    fork_here = functools.partial(session_fork.fork_zygote, session, prepare, env)
    warm.collected(names, os.environ, fork_here if warm.fork_session else None)
    _collection_over()


def end(warm: WarmStart | None) -> None:
    """No isolated test will run, or the session ended (perhaps before its collection did):
    no watch, no hold, no zygote."""
    _collection_over()
    if warm is not None:
        warm.close()


def _collection_over() -> None:
    from ddpkit.testing._warm_start import fresh_state, session_fork

    session_fork.stop_watching()
    fresh_state.release()
