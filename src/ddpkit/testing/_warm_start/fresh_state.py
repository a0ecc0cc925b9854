"""What a fresh interpreter computes from its environment as it starts, made anew in a process
forked from a warm-start zygote — and the one thing a zygote must not compute: OpenBLAS's
thread pools.

numpy's and scipy's wheels each bundle an OpenBLAS whose pthreads pool starts when the library
loads: a thread per CPU but one, sized from the environment of that moment. A zygote that
imported scipy (scikit-learn and torchmetrics import it; so does Lightning, through
torchmetrics) would hold those threads, and the preload check counts them as what they
are to it, a native thread started at import
(:func:`~ddpkit.testing._warm_start.preload.fork_hazard`): the warm start would leave scipy,
torchmetrics and Lightning to each test.

So a process that will be forked from **holds** the pools (:func:`hold`) before those imports:
the fresh-interpreter zygote from its first line, the parent pytest from the plugin's import
until its collection ends. Holding sets ``OPENBLAS_NUM_THREADS=1`` in the C environment only
(``os.putenv``): that is what OpenBLAS reads when it loads, and an OpenBLAS loaded then starts
no thread, so the zygote's thread count stays the baseline and its check stays strict (any
other thread, started by anything, still leaves its module to each test). ``os.environ``, what
Python code reads, keeps the user's value, so no module's import sees the held one.

Each process forked from a holder (and the parent pytest itself, once it has forked)
**releases** them (:func:`release`): the C environment becomes what ``os.environ`` says again,
and every pthreads OpenBLAS pool is given, through threadpoolctl, the size a fresh interpreter
with this process's environment would have given it (:func:`fresh_pool_size`) — a rank's own
``OMP_NUM_THREADS`` included. An OpenBLAS built on OpenMP starts nothing at load and follows
OpenMP's own thread count: it is left as it is. MKL starts its threads at its first parallel
call, never at load: nothing to hold.

Holding needs threadpoolctl (scikit-learn depends on it): without it nothing is held, an import
that starts a pool is left to each test as before, and the line that says so says how to keep
it (:func:`hint`). This module imports nothing but the standard library until it holds: the
zygote imports it before torch.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

#: The variable held at 1 in a zygote's C environment (OpenBLAS reads it first).
HELD_VARIABLE = "OPENBLAS_NUM_THREADS"

#: The variables OpenBLAS sizes its pool from when it loads, first set (and positive) first;
#: with none, the CPUs the process may run on (driver/others/memory.c, blas_get_cpu_number).
POOL_VARIABLES = (
    "OPENBLAS_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_DEFAULT_NUM_THREADS",
)

_held = False
_LEADING_INT = re.compile(r"\s*([+-]?\d+)")


def _atoi(value: str | None) -> int:
    """C's ``atoi``, as OpenBLAS reads a variable: leading digits, else 0 (unset)."""
    match = _LEADING_INT.match(value or "")
    return int(match.group(1)) if match else 0


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def fresh_pool_size(env: Mapping[str, str], cpus: int) -> int:
    """The size of the pool an OpenBLAS loaded with ``env`` on ``cpus`` CPUs starts (OpenBLAS
    also caps it at its build's thread limit, and so does the call that sets it)."""
    for name in POOL_VARIABLES:
        wanted = _atoi(env.get(name))
        if wanted > 0:
            return max(1, min(wanted, cpus))
    return max(1, cpus)


def can_hold() -> bool:
    """Whether :func:`hold` can hold (threadpoolctl is installed), without importing it."""
    return importlib.util.find_spec("threadpoolctl") is not None


def hold() -> bool:
    """Keep every OpenBLAS loaded from now on from starting its pool, until :func:`release`.
    False: threadpoolctl is not installed, so a pool could not be sized again after a fork
    (nothing is held then)."""
    global _held
    if _held:
        return True
    try:
        import threadpoolctl  # noqa: F401  (now, so that each fork has it imported)
    except ImportError:
        return False
    os.putenv(HELD_VARIABLE, "1")  # the C environment only: see the module docstring
    _held = True
    return True


def release() -> None:
    """Undo :func:`hold` in this process (nothing if it holds nothing): the C environment as
    ``os.environ`` says, and each pthreads OpenBLAS pool the size a fresh interpreter's would
    have. A pool that cannot be sized keeps one thread (the results are the same): one line on
    stderr says so."""
    global _held
    if not _held:
        return
    _held = False
    value = os.environ.get(HELD_VARIABLE)
    if value is None:
        os.unsetenv(HELD_VARIABLE)
    else:
        os.putenv(HELD_VARIABLE, value)
    size = fresh_pool_size(os.environ, _cpus())
    try:
        _size_pools(size)
    except Exception as err:  # threadpoolctl's own failure: the test still runs, slower
        sys.stderr.write(f"ddpkit: OpenBLAS's thread pools keep 1 thread here: {err!r}\n")


def _size_pools(size: int) -> None:
    import threadpoolctl

    controller: Any = threadpoolctl.ThreadpoolController().select(internal_api="openblas")
    for lib in controller.lib_controllers:
        # An OpenMP-built OpenBLAS started nothing and follows OpenMP's thread count.
        if getattr(lib, "threading_layer", "pthreads") != "pthreads":
            continue
        if lib.get_num_threads() != size:
            lib.set_num_threads(size)
    # threadpoolctl >= 3.8 lets one thread at a time size a pthreads pool, the first that did:
    # a fresh interpreter has none yet, so a thread the test starts may size it too.
    blas: Any = getattr(threadpoolctl, "OpenBLASController", None)
    clear = getattr(blas, "clear_controlling_thread", None)
    if clear is not None:
        clear()


def hint(hazard: str) -> str:
    """What to add to the line that leaves a module to each test for ``hazard``: how to keep it
    in the zygote, where it may be an OpenBLAS pool that was not held."""
    if "native thread" not in hazard or can_hold():
        return ""  # held wherever threadpoolctl is installed: these threads are something else
    return (
        " (if those are OpenBLAS's threads, numpy's or scipy's, installing threadpoolctl keeps "
        "them from starting in the zygote)"
    )


def fresh_process_state(env: Mapping[str, str]) -> None:
    """What a fresh interpreter computes from its environment when it starts, and a fork copied
    from the zygote instead: the temp dir, random seeds, torch's and OpenBLAS's thread counts."""
    tempfile.tempdir = None
    numpy_random: Any = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # its own entropy, as a fresh numpy's
    process: Any = sys.modules.get("multiprocessing.process")
    if process is not None:
        process.current_process().authkey = os.urandom(32)
    torch: Any = sys.modules.get("torch")
    threads = env.get("OMP_NUM_THREADS", "")
    if torch is not None and threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    release()
