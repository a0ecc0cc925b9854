"""The stall watchdog on a real rendezvous store: the rank waiting in a collective raises the
alarm, the rank outside every collective answers that it never arrived, each with its stack."""

from __future__ import annotations

import contextlib
import datetime
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest
import torch.distributed as dist

from ddpkit._runtime.ranks._stall import StallReport, StallWatchdog, stack_of_all_threads
from ddpkit.utilities._ports import bind_free_port

pytestmark = pytest.mark.timeout(60)


def store_client(host: str, port: int, timeout: float) -> Callable[[], Any]:
    """A factory for a watchdog's own connection to the store (a rank's is its process
    group's)."""

    def make() -> Any:
        return dist.TCPStore(  # type: ignore[attr-defined]
            host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout),
            wait_for_workers=False,
        )  # fmt: skip

    return make


def test_the_rank_outside_every_collective_is_named() -> None:
    with bind_free_port() as sock, contextlib.ExitStack() as stack:
        port = sock.getsockname()[1]
        server = dist.TCPStore(  # type: ignore[attr-defined]
            "127.0.0.1",
            port,
            is_master=True,
            timeout=datetime.timedelta(seconds=30),
            wait_for_workers=False,
            master_listen_fd=os.dup(sock.fileno()),  # the store owns (closes) what it gets
        )
        reports: dict[int, StallReport] = {}
        done = threading.Event()

        def on_stall(report: StallReport) -> None:
            reports[report.rank] = report
            if len(reports) == 2:
                done.set()

        dogs = [
            StallWatchdog(
                rank=rank,
                world_size=2,
                timeout=0.3,
                store=store_client("127.0.0.1", port, 30),
                prefix="test/",
                on_stall=on_stall,
            )
            for rank in (0, 1)
        ]
        waiting, late = dogs
        with late.collective("backward"):
            pass  # rank 1 took part in the first collective, then got stuck outside
        for dog in dogs:
            dog.start()
            stack.callback(dog.stop)
        with waiting.collective("backward"):  # rank 0 waits in the second, for rank 1
            assert done.wait(30)
        del server
    assert reports[1].never_arrived
    assert reports[1].note.startswith("never arrived at backward (collective #1): it left ")
    assert not reports[0].never_arrived
    assert reports[0].note.startswith("waited ")
    assert reports[0].note.endswith(
        "in backward (collective #1) for rank(s) 1, which never arrived (stall timeout 0.3 s)"
    )
    assert "test_the_rank_outside_every_collective_is_named" in reports[0].stack


def test_the_stack_shows_every_thread() -> None:
    ready, release = threading.Event(), threading.Event()

    def parked_in_a_named_function() -> None:
        ready.set()
        release.wait(10)

    thread = threading.Thread(target=parked_in_a_named_function)
    thread.start()
    try:
        ready.wait(10)
        text = stack_of_all_threads()
    finally:
        release.set()
        thread.join(10)
    assert "parked_in_a_named_function" in text
    assert "test_the_stack_shows_every_thread" in text
