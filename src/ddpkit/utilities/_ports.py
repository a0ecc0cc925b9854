"""Listening sockets for the rendezvous store: never a fixed port ddpkit chose, never a race.

The launcher binds the socket itself and hands it, open, to the store of rank zero
(``TCPStore(master_listen_fd=...)``): the port is never free between choosing and binding it.
"""

from __future__ import annotations

import errno
import socket

from ddpkit.errors import LaunchError

#: how often :func:`bind_free_port` asks the kernel for another port before giving up
FREE_PORT_TRIES = 3


def listen_on(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; a :class:`LaunchError` naming the port when it is
    taken. ``host`` ``""`` is every interface (multi-node runs), ``"127.0.0.1"`` loopback only."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A store that just ended leaves its port in TIME_WAIT; a new run may reuse it at once.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as err:
        sock.close()
        where = f"{host or '0.0.0.0'}:{port}"
        raise LaunchError(
            f"MASTER_PORT={port}: the rendezvous store cannot listen on {where} "
            f"({err.strerror or err}); another process holds the port. Fix: unset MASTER_PORT "
            f"and ddpkit picks a free port, or choose a port nothing listens on."
        ) from err
    return sock


def bind_free_port(host: str = "127.0.0.1") -> socket.socket:
    """A listening TCP socket on a port the kernel chose (bind to port 0: atomic, no window).

    The kernel can still refuse (``EADDRINUSE``/``EADDRNOTAVAIL`` when the ephemeral range is
    exhausted by connections in TIME_WAIT); it is asked again, up to :data:`FREE_PORT_TRIES`
    times, then a :class:`LaunchError` says so.
    """
    last: OSError | None = None
    for _ in range(FREE_PORT_TRIES):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((host, 0))
            sock.listen(128)
        except OSError as err:
            sock.close()
            if err.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                raise LaunchError(
                    f"the rendezvous store cannot listen on {host or '0.0.0.0'}:<free port> "
                    f"({err.strerror or err}). Fix: set MASTER_ADDR/MASTER_PORT to an address "
                    f"and port this machine can listen on."
                ) from err
            last = err
            continue
        return sock
    raise LaunchError(
        f"the rendezvous store found no free port on {host or '0.0.0.0'} after "
        f"{FREE_PORT_TRIES} tries ({last.strerror if last else 'unknown'}): the ephemeral port "
        f"range is exhausted. Fix: set MASTER_PORT to a port nothing listens on."
    ) from last


def listen_for_store(port: int | None, *, local_only: bool) -> socket.socket:
    """The rendezvous store's listening socket: on ``port`` (a ``MASTER_PORT`` the user set) or,
    for ``None``, on a port the kernel picks. On 127.0.0.1 when every rank runs on this machine
    (``local_only``: the store has no authentication), else on every interface."""
    host = "127.0.0.1" if local_only else ""
    return bind_free_port(host) if port is None else listen_on(host, port)
