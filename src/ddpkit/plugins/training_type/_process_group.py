"""The process group of a DDP stage: making it (on loopback when every rank is local) and its
stall watchdog."""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch.distributed as dist

from ddpkit._runtime.ranks._stall import StallReport, StallWatchdog
from ddpkit._tracebacks import folding_installed

#: a collective waits this much longer than the stall timeout: the stall watchdog, which dumps
#: every rank's stack and names the rank that never arrived, always acts first
COLLECTIVE_SLACK = datetime.timedelta(seconds=30)


def agent_store(
    env: Mapping[str, str], world_size: int, timeout: datetime.timedelta, stage: int
) -> tuple[Any, str]:
    """torchrun's agent store and this attempt's prefix in it, when the ranks are to use the
    agent's (``TORCHELASTIC_USE_AGENT_STORE=True``); else ``(None, "")``: ``env://``.

    The agent serves one store for every attempt of its workers, at the same port. Under
    ``env://`` a restarted attempt reads the keys the attempt before it left — a dead rank's
    address, to which gloo's connections are refused (plain torch under ``torchrun
    --max-restarts`` fails about every second restart so). So each attempt's keys (and each
    stage's) live under a prefix of their own."""
    if env.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None, ""
    store = dist.TCPStore(  # type: ignore[attr-defined]
        env["MASTER_ADDR"], int(env["MASTER_PORT"]), world_size, False, timeout
    )
    attempt = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    return store, f"ddpkit/attempt{attempt}/stage{stage}/"


def init_process_group(
    backend: str,
    *,
    rank: int,
    world_size: int,
    timeout: datetime.timedelta,
    store: Any,
    prefix: str,
    loopback: bool,
) -> None:
    """Join the default process group: through ``store`` under ``prefix`` (each stage's keys
    apart), or through ``env://`` when ``store`` is None (torchrun's agent store)."""
    import_dynamo_first()
    hook = sys.excepthook
    with gloo_on_loopback(loopback and backend == "gloo"):
        dist.init_process_group(
            backend,
            store=None if store is None else dist.PrefixStore(prefix, store),  # type: ignore[attr-defined]
            rank=rank,
            world_size=world_size,
            timeout=timeout,
        )
    _one_excepthook(hook)


def import_dynamo_first() -> None:
    """Import ``torch._dynamo`` before the group exists, not after.

    DDP imports it at its first construction (so does the first optimizer step), and an import
    made while a group exists keeps references to that group's Python object that nothing ever
    releases (torch 2.13: the default group's reference count goes up by 10 at
    ``import torch._dynamo``). ``destroy_process_group`` then cannot free the gloo backend: its
    worker and transport threads run on into interpreter finalization, where a gloo thread that
    lets go of a tensor needs the GIL of an interpreter that is gone (the mechanism of
    pytorch/pytorch#179291), and the rank can abort after a fit that ended well ("terminate
    called without an active exception", SIGABRT). Imported first, the group is freed at
    teardown and no gloo thread is left at exit. DDP would pay for the import a moment later
    anyway."""
    import torch._dynamo  # noqa: F401


def _one_excepthook(before: Any) -> None:
    """torch wraps ``sys.excepthook`` at every ``init_process_group`` so that each line of an
    uncaught traceback starts with ``[rankN]: ``. Once is enough (a second stage would prefix
    every line twice), and none where ddpkit's launcher prints the report (its folding hook
    runs in this process): that report is the job's one traceback, and its lines stay whole."""
    if folding_installed() or getattr(before, "__name__", "") == "_distributed_excepthook":
        sys.excepthook = before


def start_watchdog(
    *,
    rank: int,
    world_size: int,
    timeout: datetime.timedelta,
    stage: int,
    on_stall: Callable[[StallReport], None] | None,
) -> StallWatchdog | None:
    """The stall watchdog of this stage (none for a single rank), started."""
    if world_size < 2:
        return None
    # The process group's own store connection, already made: a new one could reach rank 0
    # after its store has gone (a stage without collectives ends at once there) and wait out
    # the store timeout. TCPStore serializes its operations, so a thread may share it.
    store = dist.distributed_c10d._get_default_store()
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    watchdog = StallWatchdog(
        rank=rank,
        world_size=world_size,
        timeout=timeout.total_seconds(),
        store=lambda: store,
        prefix=f"ddpkit/stall/{restart}/{stage}/",
        on_stall=on_stall,
    )
    watchdog.start()
    return watchdog


@contextlib.contextmanager
def gloo_on_loopback(enabled: bool) -> Iterator[None]:
    """While the process group is made: gloo's listening sockets on the loopback interface.

    gloo otherwise listens on the address the host name resolves to, often the machine's LAN
    address, with no authentication. It reads ``GLOO_SOCKET_IFNAME`` when the group is created,
    so the variable is set for that moment only and the user's environment is left as it was.
    A value the user set wins.
    """
    loopback = _loopback_interface() if enabled else None
    if loopback is None or "GLOO_SOCKET_IFNAME" in os.environ:
        yield
        return
    os.environ["GLOO_SOCKET_IFNAME"] = loopback
    try:
        yield
    finally:
        del os.environ["GLOO_SOCKET_IFNAME"]


def _loopback_interface() -> str | None:
    try:
        names = {name for _, name in socket.if_nameindex()}
    except OSError:
        return None
    return next((name for name in ("lo", "lo0") if name in names), None)
