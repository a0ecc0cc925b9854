"""What the spawn launcher does differently when its ranks are *forked* (``ddp_notebook``).

A forked rank starts as a copy of the launching process: it needs no script and no pickling, so
a notebook's classes train as they are. The price is what a copy inherits, and each is handled
here, before any rank starts or first thing in the rank:

- a process group or an initialized CUDA context cannot be forked: refused, with the fix;
- the launcher's SIGINT/SIGTERM handlers (they only set a flag) and its wakeup pipe: the rank
  gets the default ones back, so the launcher's SIGTERM ends it;
- OpenMP's thread pool: GNU libgomp is not fork-safe, and a rank that runs a parallel region
  after its parent did hangs. A forked rank runs one intra-op thread (``OMP_NUM_THREADS=1``
  for what it starts).

And the spawn launcher's own check for a session with no main file: what it would pickle must
not name a class or function of ``__main__``, which no spawned rank can import.
"""

from __future__ import annotations

import io
import os
import pickle
import signal
from types import FunctionType
from typing import Any

from ddpkit.errors import LaunchError
from ddpkit.utilities._script import has_script


def check_fork_safe(call: str) -> None:
    """Raise before forking what a forked rank could not use: this process's process group or
    its CUDA context."""
    import torch

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        raise LaunchError(
            f"{call}: this process is in a torch.distributed process group already, and the "
            f"forked ranks would inherit it. Fix: torch.distributed.destroy_process_group() "
            f"before fit, or restart the kernel."
        )
    if torch.cuda.is_initialized():
        raise LaunchError(
            f"{call}: CUDA is initialized in this process (a tensor or module moved to the GPU, "
            f"a torch.cuda call), and a forked rank cannot use CUDA then. Fix: restart the "
            f"kernel and keep the notebook's cells off the GPU before fit (the Trainer moves "
            f"the module), or run the code from a script with strategy='ddp'."
        )


def in_forked_rank() -> None:
    """First thing in a forked rank: the default signal handling back, one intra-op thread."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.environ["OMP_NUM_THREADS"] = "1"  # the CPU accelerator keeps a user's thread count
    import torch

    torch.set_num_threads(1)


def as_if_unpickled(plugin: Any) -> None:
    """In a forked rank, after its variables are set: what unpickling does to a spawned rank's
    training type, done to the inherited copy (the launcher's stage objects dropped, the
    environment reads this rank's variables, not the launcher's snapshot)."""
    for obj in (plugin, plugin.cluster_environment):
        vars(obj).update(obj.__getstate__())


class _Finder(pickle.Pickler):
    """A pickler that notes every class and function of ``__main__`` it is asked to pickle."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self.found: list[str] = []

    def reducer_override(self, obj: Any) -> Any:
        # Classes and functions are pickled by name; an instance names its class, met next.
        main = isinstance(obj, (type, FunctionType)) and obj.__module__ == "__main__"
        if main and obj.__qualname__ not in self.found:
            self.found.append(obj.__qualname__)
        return NotImplemented


def refuse_main_references(payload: Any) -> None:
    """Under spawn in a session whose ``__main__`` has no file (a notebook, a shell): raise,
    naming ``ddp_notebook``, when ranks would have to import a class or function of it."""
    if has_script():
        return  # a script: every spawned rank imports it as __mp_main__
    finder = _Finder(io.BytesIO())
    finder.dump(payload)  # notes the classes and functions of __main__ that pickling names
    names = finder.found
    if names:
        raise LaunchError(
            f"ddp_spawn starts each rank as a fresh interpreter, which cannot import what this "
            f"session defined in __main__ (a notebook's cells, a shell): {', '.join(names)}. "
            f"Fix: strategy='ddp_notebook' (the ranks are forked from this session and "
            f"inherit its classes), or move those definitions into an importable module."
        )
