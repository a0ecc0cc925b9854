"""Listening sockets for the rendezvous store: never a fixed port, never a race."""

from __future__ import annotations

import socket

__all__ = ["bind_free_port"]


def bind_free_port(host: str = "127.0.0.1") -> socket.socket:
    """A listening TCP socket on a port the kernel chose.

    The socket is kept open and handed to the store (``TCPStore(master_listen_fd=...)``), so the
    port is never free between choosing and binding it, and on a single machine the store
    listens on loopback only.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock
