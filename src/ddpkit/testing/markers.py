"""The plugin's two markers, read into frozen specs (with errors that show the marker as
written)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.errors import MisconfigurationError

__all__ = [
    "DistributedSpec",
    "StandaloneSpec",
    "distributed_spec",
    "resolve_timeout",
    "standalone_spec",
]

STANDALONE_HELP = (
    "standalone(timeout=None): run the test in a fresh interpreter of its own "
    "(python -m pytest <node id>), e.g. when its Trainer uses DDPPlugin; timeout in seconds "
    "(default: the suite's pytest-timeout) ends the whole process tree (ddpkit.testing)"
)
DISTRIBUTED_HELP = (
    "distributed(world_size=2, backend='gloo', timeout=None): run the test on world_size fresh "
    "ranks with a process group already initialized; the dist fixture gives rank, world_size "
    "and device (ddpkit.testing)"
)

_BACKENDS = ("gloo", "nccl")


@dataclass(frozen=True, kw_only=True)
class StandaloneSpec:
    timeout: float | None = None
    """Seconds before the test's whole process tree is ended; None: the suite's timeout."""


@dataclass(frozen=True, kw_only=True)
class DistributedSpec:
    world_size: int = 2
    """How many ranks run the test."""
    backend: str = "gloo"
    """The process group's backend: gloo (CPU) or nccl (one GPU per rank)."""
    timeout: float | None = None
    """Seconds before every rank is ended; None: the suite's timeout."""


def _call(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    words = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"@pytest.mark.{name}({', '.join(words)})"


def _timeout(call: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise MisconfigurationError(
            f"{call}: timeout must be a positive number of seconds, got {value!r}. Fix: timeout=60."
        )
    return float(value)


def _unknown(call: str, kwargs: Mapping[str, Any], known: Sequence[str]) -> None:
    extra = sorted(set(kwargs) - set(known))
    if extra:
        raise MisconfigurationError(
            f"{call}: unknown argument{'s' if len(extra) > 1 else ''} {', '.join(extra)}. "
            f"Fix: use {', '.join(known)}."
        )


def standalone_spec(args: Sequence[Any], kwargs: Mapping[str, Any]) -> StandaloneSpec:
    """``@pytest.mark.standalone(...)`` as a spec (``args``/``kwargs`` of the marker)."""
    call = _call("standalone", args, kwargs)
    _unknown(call, kwargs, ("timeout",))
    if len(args) > 1 or (args and "timeout" in kwargs):
        raise MisconfigurationError(f"{call}: takes one argument, timeout. Fix: timeout=60.")
    return StandaloneSpec(timeout=_timeout(call, args[0] if args else kwargs.get("timeout")))


def distributed_spec(args: Sequence[Any], kwargs: Mapping[str, Any]) -> DistributedSpec:
    """``@pytest.mark.distributed(...)`` as a spec; ``world_size`` may be the one positional
    argument."""
    call = _call("distributed", args, kwargs)
    _unknown(call, kwargs, ("world_size", "backend", "timeout"))
    if len(args) > 1 or (args and "world_size" in kwargs):
        raise MisconfigurationError(
            f"{call}: only world_size may be positional. Fix: "
            f"@pytest.mark.distributed(world_size=2, backend='gloo', timeout=60)."
        )
    world_size = args[0] if args else kwargs.get("world_size", 2)
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise MisconfigurationError(
            f"{call}: world_size must be a positive int, got {world_size!r}. Fix: world_size=2."
        )
    backend = kwargs.get("backend", "gloo")
    if backend not in _BACKENDS:
        raise MisconfigurationError(
            f"{call}: backend must be one of {', '.join(_BACKENDS)}, got {backend!r}. "
            f"Fix: backend='gloo' on CPU, backend='nccl' with one GPU per rank."
        )
    return DistributedSpec(
        world_size=world_size, backend=backend, timeout=_timeout(call, kwargs.get("timeout"))
    )


def resolve_timeout(marker_timeout: float | None, suite_timeout: float | None) -> float | None:
    """The marker's timeout, else the suite's (pytest-timeout; 0 means none)."""
    if marker_timeout is not None:
        return marker_timeout
    if suite_timeout is not None and suite_timeout > 0:
        return float(suite_timeout)
    return None
