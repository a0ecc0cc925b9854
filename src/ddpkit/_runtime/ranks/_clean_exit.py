"""How a rank process ends without dying in the interpreter's teardown.

torch's gloo backend runs C++ threads (its work loop, the callbacks of a collective's future)
that take the GIL to drop a tensor or run Python. A rank whose interpreter tears down while one
of them does dies of SIGABRT ("terminate called without an active exception", or "Fatal Python
error: ... the GIL is released"; pytorch/pytorch#179291): the process group still lives then,
held by the DDP wrapper and by the frames of a traceback. Two exits avoid it:

- a stage that ended well, in a multiprocessing child (Lightning's own ``ddp_spawn``, which
  ``ddpkit.lightning.Trainer(supervise=False)`` runs; Lightning never destroys the group there):
  the group is destroyed at the exit, while the interpreter is whole
  (:func:`destroy_group_at_exit`);
- a rank whose failure its launcher reports: it runs its exit handlers as usual and then ends
  without the teardown (:func:`end_after_exit_handlers`), as a forked multiprocessing child
  always does. Nothing of the teardown is owed to a failed rank but the flush of what it wrote
  to files it never closed, and that is done first.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import multiprocessing
import os
import sys

_registered = False
_WRITERS = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)


def _destroy() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def destroy_group_at_exit() -> None:
    """Called when a stage ended well: in a multiprocessing child with a process group, destroy
    it when the process exits (once per process; a fork child exits without ``atexit``, and
    there no interpreter is torn down)."""
    import torch.distributed as dist

    global _registered
    if _registered or multiprocessing.parent_process() is None:
        return
    if dist.is_available() and dist.is_initialized():
        atexit.register(_destroy)
        _registered = True


def end_after_exit_handlers() -> None:
    """Called when a failure that the launcher reports is about to end this rank (exit status
    1, an uncaught exception's): the rank ends after its exit handlers (``atexit``, in their
    usual order), without the interpreter's teardown. Only for an exit that is certain: an
    exception already uncaught, a spawned rank's stage that raised."""
    # Registered last (again, if it was before), so called first: it runs the others.
    atexit.unregister(_exit_now)
    atexit.register(_exit_now)


def _exit_now() -> None:
    atexit.unregister(_exit_now)
    try:
        atexit._run_exitfuncs()  # the other handlers, as the interpreter would have run them
    finally:
        _flush_writers()
        os._exit(1)


def _flush_writers() -> None:
    """What the teardown would have written: the buffers of files opened for writing and never
    closed (their deallocation flushes them), and the standard streams."""
    for obj in gc.get_objects():
        # type(), not isinstance(): that also asks ``obj.__class__``, which some module-level
        # proxies answer with a warning (torch.distributed.reduce_op's FutureWarning).
        if issubclass(type(obj), _WRITERS):
            with contextlib.suppress(Exception):
                if not obj.closed:
                    obj.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
