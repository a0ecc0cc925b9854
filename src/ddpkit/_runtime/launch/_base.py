"""Who starts the ranks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


class Launcher(ABC):
    """Runs a function on every rank of this node and returns rank zero's result."""

    #: the name ``ddpkit explain`` shows
    name: str = "base"

    @abstractmethod
    def launch(self, fn: Callable[..., R], *args: Any, max_restarts: int = 0) -> R:
        """Run ``fn(*args)`` on every local rank; return what it returned on rank zero. When a
        rank fails, the job ends; with ``max_restarts``, it then starts again on new ranks, up
        to that many times (:mod:`ddpkit._runtime.restart`)."""

    #: True when the ranks run in other processes and the launching process only waits: the
    #: trainer then adopts rank zero's results (weights, metrics, counters) from the return value.
    returns_to_parent: bool = False
