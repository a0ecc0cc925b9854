"""The store's listening socket: a port the kernel chose, on loopback; a taken port is named."""

from __future__ import annotations

import socket

import pytest

from ddpkit.errors import LaunchError
from ddpkit.utilities._ports import bind_free_port, listen_for_store, listen_on


def test_a_free_port_on_loopback() -> None:
    with bind_free_port("127.0.0.1") as sock:
        host, port = sock.getsockname()
        assert host == "127.0.0.1"
        assert port > 0
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # it listens


def test_listen_on_a_given_port() -> None:
    with bind_free_port() as probe:
        port = probe.getsockname()[1]
    with listen_on("127.0.0.1", port) as sock:
        assert sock.getsockname() == ("127.0.0.1", port)


def test_a_taken_port_fails_with_its_number_and_a_fix() -> None:
    with bind_free_port() as taken:
        port = taken.getsockname()[1]
        with pytest.raises(LaunchError) as info:
            listen_on("127.0.0.1", port)
    message = str(info.value)
    assert message.startswith(f"MASTER_PORT={port}: the rendezvous store cannot listen on ")
    assert f"127.0.0.1:{port}" in message
    assert "Fix: unset MASTER_PORT" in message


@pytest.mark.parametrize(("local_only", "host"), [(True, "127.0.0.1"), (False, "0.0.0.0")])
def test_the_store_listens_on_loopback_only_when_every_rank_is_local(
    local_only: bool, host: str
) -> None:
    with listen_for_store(None, local_only=local_only) as sock:
        bound_host, port = sock.getsockname()
        assert (bound_host, port > 0) == (host, True)
    with listen_for_store(port, local_only=local_only) as sock:
        assert sock.getsockname() == (host, port)
