"""A snapshot of the machine: the only place the connector reads the outside world."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpkit._runtime.launch._pytest_session import is_pytest_session
from ddpkit.plugins.environments._mpi import mpi4py_installed
from ddpkit.utilities._procs import usable_cores
from ddpkit.utilities._script import has_script


@dataclass(frozen=True, kw_only=True)
class Probe:
    """What the machine looked like when the Trainer was built. Tests build one by hand
    (``ddpkit.testing.make_probe``) to resolve flags for a machine they do not have."""

    cuda_available: bool = False
    """``torch.cuda.is_available()``: answers without initializing CUDA."""

    cuda_device_count: int = 0
    """``torch.cuda.device_count()``: the GPUs visible to this process (CUDA_VISIBLE_DEVICES)."""

    env: Mapping[str, str] = field(default_factory=lambda: types.MappingProxyType({}))
    """A frozen copy of ``os.environ``."""

    interactive: bool = False
    """True when there is no script to re-run (a REPL, a notebook, ``python -c``)."""

    cpu_count: int = 1
    """Cores this process may run on."""

    mpi4py_available: bool = False
    """mpi4py can be imported (not imported: that would initialize MPI). An MPI job without
    MASTER_ADDR/MASTER_PORT needs it to learn where rank 0 listens."""

    def __reduce__(self) -> tuple[Any, ...]:
        # A mapping proxy does not pickle; spawned ranks get a plain copy.
        return (_rebuild, ({**self.__dict__, "env": dict(self.env)},))

    @classmethod
    def capture(cls) -> Probe:
        """Read the machine now. Neither initializes CUDA nor starts anything."""
        import torch

        available = bool(torch.cuda.is_available())
        return cls(
            cuda_available=available,
            cuda_device_count=int(torch.cuda.device_count()) if available else 0,
            env=types.MappingProxyType(dict(os.environ)),
            interactive=_is_interactive(),
            cpu_count=usable_cores(),
            mpi4py_available=mpi4py_installed(),
        )


def _rebuild(fields: dict[str, Any]) -> Probe:
    return Probe(**{**fields, "env": types.MappingProxyType(fields["env"])})


def _is_interactive() -> bool:
    # `python -c` and notebooks have a __main__ without a file to re-run. A pytest-xdist worker
    # is started as `python -c` too, but it is a pytest session: there, as in a plain session,
    # a DDPPlugin fit is refused at launch with the pytest-session error (the fix: the
    # standalone marker), and nothing that only builds a Trainer is refused.
    if is_pytest_session(sys.modules.get("__main__"), sys.modules):
        return False
    return not has_script()
