"""Fakes shipped as public API: resolve flags for a machine you do not have."""

from __future__ import annotations

import types
from collections.abc import Mapping

from ddpkit.connector._probe import Probe


def make_probe(
    *,
    gpus: int = 0,
    env: Mapping[str, str] | None = None,
    interactive: bool = False,
    cpu_count: int = 2,
    mpi4py: bool = False,
) -> Probe:
    """A :class:`~ddpkit.connector.Probe` of a machine with ``gpus`` CUDA devices and the given
    environment variables, e.g. ``resolve(Flags.of(gpus=2), make_probe(gpus=2))``; ``mpi4py``:
    whether mpi4py can be imported there."""
    return Probe(
        cuda_available=gpus > 0,
        cuda_device_count=gpus,
        env=types.MappingProxyType(dict(env or {})),
        interactive=interactive,
        cpu_count=cpu_count,
        mpi4py_available=mpi4py,
    )
