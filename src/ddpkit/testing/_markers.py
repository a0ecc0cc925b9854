"""The plugin's two markers, read into frozen specs (with errors that show the marker as
written)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.errors import MisconfigurationError

STANDALONE_HELP = (
    "standalone(timeout=None, fresh_interpreter=False): run the test in a process of its own "
    "(pytest <node id>, forked warm, or a fresh interpreter with fresh_interpreter=True), e.g. "
    "when its Trainer uses DDPPlugin; timeout in seconds (default: the suite's pytest-timeout) "
    "ends the whole process tree (ddpkit.testing)"
)
DISTRIBUTED_HELP = (
    "distributed(world_size=2, backend='gloo', timeout=None, fresh_interpreter=False): run the "
    "test on world_size new ranks with a process group already initialized; the dist fixture "
    "gives rank, world_size and device (ddpkit.testing)"
)

_BACKENDS = ("gloo", "nccl")


@dataclass(frozen=True, kw_only=True)
class StandaloneSpec:
    timeout: float | None = None
    """Seconds before the test's whole process tree is ended; None: the suite's timeout."""
    fresh_interpreter: bool = False
    """Start the test's process as a fresh interpreter, not as a fork of the warm start."""


@dataclass(frozen=True, kw_only=True)
class DistributedSpec:
    world_size: int = 2
    """How many ranks run the test."""
    backend: str = "gloo"
    """The process group's backend: gloo (CPU) or nccl (one GPU per rank)."""
    timeout: float | None = None
    """Seconds before every rank is ended; None: the suite's timeout."""
    fresh_interpreter: bool = False
    """Start each rank as a fresh interpreter, not as a fork of the warm start."""


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


def _flag(call: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise MisconfigurationError(
            f"{call}: {name} must be True or False, got {value!r}. Fix: {name}=True."
        )
    return value


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
    _unknown(call, kwargs, ("timeout", "fresh_interpreter"))
    if len(args) > 1 or (args and "timeout" in kwargs):
        raise MisconfigurationError(
            f"{call}: only timeout may be positional. Fix: "
            f"@pytest.mark.standalone(timeout=60, fresh_interpreter=False)."
        )
    return StandaloneSpec(
        timeout=_timeout(call, args[0] if args else kwargs.get("timeout")),
        fresh_interpreter=_flag(call, "fresh_interpreter", kwargs.get("fresh_interpreter", False)),
    )


def distributed_spec(args: Sequence[Any], kwargs: Mapping[str, Any]) -> DistributedSpec:
    """``@pytest.mark.distributed(...)`` as a spec; ``world_size`` may be the one positional
    argument."""
    call = _call("distributed", args, kwargs)
    _unknown(call, kwargs, ("world_size", "backend", "timeout", "fresh_interpreter"))
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
        world_size=world_size,
        backend=backend,
        timeout=_timeout(call, kwargs.get("timeout")),
        fresh_interpreter=_flag(call, "fresh_interpreter", kwargs.get("fresh_interpreter", False)),
    )


def resolve_timeout(marker_timeout: float | None, suite_timeout: float | None) -> float | None:
    """The marker's timeout, else the suite's (pytest-timeout; 0 means none)."""
    if marker_timeout is not None:
        return marker_timeout
    if suite_timeout is not None and suite_timeout > 0:
        return float(suite_timeout)
    return None
