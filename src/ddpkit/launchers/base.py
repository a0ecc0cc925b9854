"""Who starts the ranks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Launcher"]

R = TypeVar("R")


class Launcher(ABC):
    """Runs a function on every rank of this node and returns rank zero's result."""

    #: the name ``ddpkit explain`` shows
    name: str = "base"

    @abstractmethod
    def launch(self, fn: Callable[..., R], *args: Any) -> R:
        """Run ``fn(*args)`` on every local rank; return what it returned on rank zero."""

    @property
    def is_interactive_compatible(self) -> bool:
        """True when it works without a script to re-run."""
        return True
