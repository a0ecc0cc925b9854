"""Where the ranks of a job meet: the rendezvous store's address and port, and — in the process
that serves the store — its listening socket and the store server made on it.

A launcher of ddpkit's binds the store's socket before it starts any rank (the port is never free
between choosing and using it; a busy ``MASTER_PORT`` fails before there is a rank to orphan) and
hands each stage a frozen :class:`Rendezvous`. Rank 0 serves the store on that socket; the other
ranks connect to ``address:port``. A process that no launcher of ddpkit's started (srun's rank 0)
binds its own, once per port for the life of the process (:func:`host_for`).

One store server per listening socket, for the life of the process: every stage joins it under a
key prefix of its own. A server per stage would share the socket with the previous stage's server,
which lives as long as that stage's process group does (the DDP module holds it until the garbage
collector runs), and would take some of the connections, stale keys and all.

The store has no authentication: anyone on the machine may connect to its port. So a job that
one of ddpkit's launchers starts keeps its keys under an unguessable prefix (:attr:`Rendezvous
.key`, 128 random bits), handed to its ranks privately (in their environment, which only this
user can read): a stranger connected to the store can neither read nor set the job's keys —
join a stage, redirect a rank's connections, raise the stall alarm.
"""

from __future__ import annotations

import datetime
import os
import secrets
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpkit._runtime.ranks._names import ENV_JOB_KEY
from ddpkit.utilities._ports import listen_for_store


class StoreHost:
    """The listening socket of the rendezvous store, and the server made on it on first use.

    Owned by whoever bound the socket (a launcher, or :func:`host_for`); :meth:`server` is called
    in the process that is rank 0. The server lives as long as this object.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.port: int = sock.getsockname()[1]
        self._server: Any = None
        self._lock = threading.Lock()

    @classmethod
    def bind(cls, port: int | None, *, local_only: bool) -> StoreHost:
        """Bind ``port`` (None: a free port the kernel picks); on 127.0.0.1 when every rank runs
        on this machine. :class:`~ddpkit.errors.LaunchError` when the port is taken."""
        return cls(listen_for_store(port, local_only=local_only))

    def server(self, address: str, world_size: int, timeout: datetime.timedelta) -> Any:
        """The store's server on this socket: made on the first call, the same one after."""
        with self._lock:
            if self._server is None:
                import torch.distributed as dist

                self._server = dist.TCPStore(  # type: ignore[attr-defined]
                    address,
                    self.port,
                    world_size,
                    True,
                    timeout,
                    wait_for_workers=False,
                    master_listen_fd=os.dup(self.sock.fileno()),  # the store closes its copy
                )
            return self._server

    def close(self) -> None:
        """Close the listening socket (a server already made keeps its own descriptor)."""
        self.sock.close()


def job_key(all_ranks_local: bool, env: Mapping[str, str]) -> str:
    """The key of a job a launcher of ddpkit's starts (the prefix of every store key of the job,
    see the module docstring): made here when every rank is this launcher's. Nodes started by
    hand cannot hand each other a key made on one of them: they use the one every node was given
    (``DDPKIT_JOB_KEY``, docs/reliability.md), or none."""
    return secrets.token_hex(16) if all_ranks_local else env.get(ENV_JOB_KEY, "")


@dataclass(frozen=True)
class Rendezvous:
    """Where the ranks of one stage meet. ``host`` is set in the process that serves the store
    (rank 0 of a job ddpkit launched) and None everywhere else. ``key``: the job's key ('' for
    ranks no launcher of ddpkit's started, which have none)."""

    address: str
    port: int
    host: StoreHost | None = None
    key: str = field(default="", repr=False)

    @property
    def prefix(self) -> str:
        """Where the job's keys live in the store."""
        return f"ddpkit/{self.key}/" if self.key else "ddpkit/"

    def store(self, *, is_server: bool, world_size: int, timeout: datetime.timedelta) -> Any:
        """This rank's connection to the store: the server on rank 0, a client elsewhere."""
        if is_server:
            if self.host is None:  # the plugin gives rank 0 a host; a bug if it did not
                raise RuntimeError(f"rank 0 of {self} has no store to serve")
            return self.host.server(self.address, world_size, timeout)
        import torch.distributed as dist

        return dist.TCPStore(  # type: ignore[attr-defined]
            self.address, self.port, world_size, False, timeout, wait_for_workers=False
        )


_hosts: dict[int, StoreHost] = {}
_hosts_lock = threading.Lock()


def host_for(port: int | None, *, local_only: bool) -> StoreHost:
    """The store host of ``port`` in this process, bound on first use (srun's rank 0, whose
    port comes from the job and which no launcher of ddpkit's started). ``None``: a new one on a
    port the kernel picks, kept the same way (a later call finds it by its port), for a rank 0
    that must tell the others its port before its store starts (an MPI job without
    MASTER_PORT)."""
    with _hosts_lock:
        host = None if port is None else _hosts.get(port)
        if host is None:
            host = StoreHost.bind(port, local_only=local_only)
            _hosts[host.port] = host
        return host
