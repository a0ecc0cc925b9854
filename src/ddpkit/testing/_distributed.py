"""``@pytest.mark.distributed``: the environment of each rank (parent side) and the process group
each rank joins before the test (rank side).

The parent binds the rendezvous socket on ``127.0.0.1`` port 0 (the kernel picks a free port, so
parallel tests and pytest-xdist workers never collide) and hands the open socket to rank 0, whose
TCPStore listens on it: the port is never free between choosing and using it. Nothing of a test
listens beyond loopback: gloo's sockets are on the loopback interface too.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddpkit._runtime.ranks._names import ENV_TESTING_STORE_FD
from ddpkit.testing._markers import DistributedSpec

if TYPE_CHECKING:
    import torch

#: Rank 0 only: the descriptor of the listening socket its TCPStore serves on.
ENV_STORE_FD = ENV_TESTING_STORE_FD

# A collective waits this much longer than the test's timeout: the parent, which ends every
# rank at the timeout and shows their stacks, always acts first.
_COLLECTIVE_SLACK_SECONDS = 30.0
_DEFAULT_COLLECTIVE_SECONDS = 1800.0


@dataclass(frozen=True)
class DistInfo:
    """What the ``dist`` fixture gives a distributed test."""

    rank: int
    world_size: int
    device: torch.device
    backend: str


def rank_environment(
    base: Mapping[str, str],
    *,
    rank: int,
    world_size: int,
    port: int,
    store_fd: int | None,
    cpu_count: int,
) -> dict[str, str]:
    """``base`` plus the variables of rank ``rank`` (torchrun's names, without GROUP_RANK: the
    rank is not a torchrun job, and ddpkit's LocalEnvironment reads these as a launched rank)."""
    env = dict(
        base,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
    )
    if store_fd is not None:
        env[ENV_STORE_FD] = str(store_fd)
    else:
        env.pop(ENV_STORE_FD, None)
    # ranks × threads must not exceed the cores, or the ranks crawl.
    env.setdefault("OMP_NUM_THREADS", str(max(1, cpu_count // world_size)))
    return env


def init_group(spec: DistributedSpec, env: Mapping[str, str] | None = None) -> DistInfo:
    """In a rank: join the test's process group (rank 0 serves the store on the socket the
    parent handed it)."""
    import torch
    import torch.distributed as dist

    env = os.environ if env is None else env
    rank, world_size = int(env["RANK"]), int(env["WORLD_SIZE"])
    seconds = (spec.timeout or _DEFAULT_COLLECTIVE_SECONDS) + _COLLECTIVE_SLACK_SECONDS
    timeout = datetime.timedelta(seconds=seconds)
    listen_fd = int(env[ENV_STORE_FD]) if rank == 0 else None
    store = dist.TCPStore(  # type: ignore[attr-defined]
        env["MASTER_ADDR"],
        int(env["MASTER_PORT"]),
        world_size,
        rank == 0,
        timeout,
        wait_for_workers=False,
        master_listen_fd=listen_fd,
    )
    device = torch.device("cpu")
    if spec.backend == "nccl":
        local = int(env.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    # Every rank of a distributed test is on this machine: gloo's connections on loopback, as
    # DDPPlugin makes them (else gloo listens on the address the host name resolves to).
    from ddpkit.plugins.training_type._process_group import gloo_on_loopback, import_dynamo_first
    from ddpkit.testing._warm_start import ends_without_finalizing

    if not ends_without_finalizing():
        # A fresh interpreter finalizes at its end, where a gloo thread that a test body's DDP
        # wrap kept alive (it imports torch._dynamo) can abort the rank; a fork ends through
        # os._exit, and leaves the import (1.5 s of CPU) to the test bodies that need it.
        import_dynamo_first()
    with gloo_on_loopback(spec.backend == "gloo"):
        dist.init_process_group(
            spec.backend, store=store, rank=rank, world_size=world_size, timeout=timeout
        )
        if spec.backend == "gloo":
            # gloo's connectFullMesh can return on rank 0 before rank 1's side of the pair has
            # finished its handshake: a test body with no collective then ends rank 0 and closes
            # the pair under rank 1 ("Connection closed by peer" in its setup, seen on a loaded
            # machine). One barrier: every rank's group is whole before any test body runs.
            dist.barrier()
    return DistInfo(rank=rank, world_size=world_size, device=device, backend=spec.backend)
