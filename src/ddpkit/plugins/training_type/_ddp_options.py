"""The constructor options of DDPPlugin and DDPSpawnPlugin, validated where the user passes them.

Each check raises :class:`MisconfigurationError` quoting the plugin call as written, so that a bad
value is refused at ``DDPPlugin(...)``, never deep inside a rank.
"""

from __future__ import annotations

import datetime
import inspect
import math
from collections.abc import Mapping
from typing import Any

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.training_type._base import plugin_call
from ddpkit.utilities._suggest import choices, did_you_mean

#: the stall timeout when the user sets none (torch's own process-group default)
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
#: a longer stall timeout is no timeout at all; past it, timedelta arithmetic overflows too
MAX_TIMEOUT = datetime.timedelta(days=30)
#: process-group backends torch.distributed knows
BACKENDS = ("gloo", "mpi", "nccl", "ucc")
#: how DDPSpawnPlugin may start its ranks: spawn (a fresh interpreter each) or forkserver (forked
#: from a server that imported torch once)
START_METHODS = ("fork", "forkserver", "spawn")
# Set by DDPPlugin itself: from the rank's device, or by the named arguments.
_OWN_DDP_ARGUMENTS = (
    "module",
    "device_ids",
    "output_device",
    "find_unused_parameters",
    "static_graph",
    "gradient_as_bucket_view",
)


def check_timeout(call: str, value: Any) -> datetime.timedelta | None:
    """``None``, a timedelta or a number of seconds: > 0, finite, at most :data:`MAX_TIMEOUT`."""
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise MisconfigurationError(
            f"{call}: timeout must be a number of seconds or a datetime.timedelta, not "
            f"{type(value).__name__}. Fix: timeout=1800 (30 minutes, the default)."
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise MisconfigurationError(
            f"{call}: timeout={value!r} is not a positive, finite time: it is how long a rank "
            f"waits in a collective for a rank that never arrives before every rank's stack is "
            f"shown and the job ends. Fix: timeout=1800 (30 minutes, the default)."
        )
    if seconds > MAX_TIMEOUT.total_seconds():
        raise MisconfigurationError(
            f"{call}: timeout={value!r} s is longer than {MAX_TIMEOUT.days} days, which is no "
            f"stall detection at all. Fix: timeout={int(MAX_TIMEOUT.total_seconds())} or less."
        )
    return datetime.timedelta(seconds=seconds)


def parse_backend_option(call: str, value: Any) -> str | None:
    """``None`` (the accelerator's default), a backend name, or torch's per-device form
    ``"cpu:gloo,cuda:nccl"``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise MisconfigurationError(
            f"{call}: process_group_backend must be a name such as 'gloo' or 'nccl', not "
            f"{type(value).__name__}. Fix: process_group_backend='gloo'."
        )
    names = [part.partition(":")[2] if ":" in part else part for part in value.split(",")]
    unknown = [n for n in names if n.strip().lower() not in BACKENDS]
    if unknown:
        raise MisconfigurationError(
            f"{call}: process_group_backend={value!r} is not a torch.distributed backend. "
            f"Choose one of {choices(BACKENDS)}"
            f"{did_you_mean(unknown[0], BACKENDS)}."
        )
    return value.lower()


def check_start_method(call: str, value: Any) -> str:
    if value not in START_METHODS:
        raise MisconfigurationError(
            f"{call}: start_method={value!r} is not a start method DDPSpawnPlugin supports. "
            f"Choose one of {choices(START_METHODS)}"
            f"{did_you_mean(value, START_METHODS)}."
        )
    return str(value)


def check_ddp_kwargs(call: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Extra keywords must be DistributedDataParallel's own, and not the ones ddpkit sets."""
    import torch

    known = [
        name
        for name in inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters
        if name not in _OWN_DDP_ARGUMENTS
    ]
    for name in kwargs:
        if name in ("device_ids", "output_device"):
            raise MisconfigurationError(
                f"{call}: {name} is set by ddpkit from each rank's device (cuda:<local rank>, or "
                f"none on CPU). Fix: drop {name}; choose the GPUs with Trainer(devices=[...])."
            )
        if name not in known:
            raise MisconfigurationError(
                f"{call}: {name}= is neither an option of DDPPlugin nor of "
                f"torch.nn.parallel.DistributedDataParallel{did_you_mean(name, known)}. "
                f"DistributedDataParallel takes {', '.join(sorted(known))}."
            )
    return dict(kwargs)


_DEFAULTS: dict[str, Any] = {
    "find_unused_parameters": True,
    "static_graph": False,
    "gradient_as_bucket_view": False,
    "timeout": None,
    "process_group_backend": None,
}


def ddp_call(plugin: str, given: Mapping[str, Any]) -> str:
    """``given`` as passed to ``plugin``'s constructor, as a call for messages: the values that
    differ from the defaults, and DistributedDataParallel's own keywords."""
    return plugin_call(
        plugin, {k: v for k, v in given.items() if k not in _DEFAULTS or v != _DEFAULTS[k]}
    )
