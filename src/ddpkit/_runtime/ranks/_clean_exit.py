"""A rank process that a multiprocessing launcher started (Lightning's own ``ddp_spawn``, which
``ddpkit.lightning.Trainer(supervise=False)`` runs) exits after its stage with the process group
still up: Lightning never destroys it there. Gloo's worker threads may then hold tensors while
the interpreter is torn down, and the rank dies of SIGABRT ("terminate called without an active
exception"; pytorch/pytorch#179291) after a stage that went well. Such a rank destroys the group
at its exit, while the interpreter is whole: only after a stage that ended well, as a collective
stuck on a lost peer would otherwise hold the exit."""

from __future__ import annotations

import atexit
import multiprocessing

import torch.distributed as dist

_registered = False


def _destroy() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def destroy_group_at_exit() -> None:
    """Called when a stage ended well: in a multiprocessing child with a process group, destroy
    it when the process exits (once per process; a fork child exits without ``atexit``, and
    there no interpreter is torn down)."""
    global _registered
    if _registered or multiprocessing.parent_process() is None:
        return
    if dist.is_available() and dist.is_initialized():
        atexit.register(_destroy)
        _registered = True
