"""ddpkit: one Trainer for one CPU, many CPU processes, a GPU box or a cluster — by flags only.

The public names are imported on first use (PEP 562), so that ``import ddpkit`` and the
``ddpkit`` command's ``--version`` / ``--help`` do not pay for importing torch;
``from ddpkit import Trainer`` imports what it needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ddpkit.__about__ import __version__

if TYPE_CHECKING:
    from ddpkit.core._datamodule import DataModule
    from ddpkit.core._module import Module
    from ddpkit.errors import (
        ChildFailedError,
        DDPKitDeprecationWarning,
        DDPKitError,
        DDPKitWarning,
        LaunchError,
        MisconfigurationError,
    )
    from ddpkit.plugins import DDPPlugin, DDPSpawnPlugin, SingleDevicePlugin
    from ddpkit.trainer._trainer import Trainer
    from ddpkit.utilities._seed import seed_everything

__all__ = [
    "ChildFailedError",
    "DDPKitDeprecationWarning",
    "DDPKitError",
    "DDPKitWarning",
    "DDPPlugin",
    "DDPSpawnPlugin",
    "DataModule",
    "LaunchError",
    "MisconfigurationError",
    "Module",
    "SingleDevicePlugin",
    "Trainer",
    "__version__",
    "seed_everything",
]

#: Where each public name lives.
_HOMES = {
    "ChildFailedError": "ddpkit.errors",
    "DDPKitDeprecationWarning": "ddpkit.errors",
    "DDPKitError": "ddpkit.errors",
    "DDPKitWarning": "ddpkit.errors",
    "DDPPlugin": "ddpkit.plugins",
    "DDPSpawnPlugin": "ddpkit.plugins",
    "DataModule": "ddpkit.core._datamodule",
    "LaunchError": "ddpkit.errors",
    "MisconfigurationError": "ddpkit.errors",
    "Module": "ddpkit.core._module",
    "SingleDevicePlugin": "ddpkit.plugins",
    "Trainer": "ddpkit.trainer._trainer",
    "seed_everything": "ddpkit.utilities._seed",
}


#: Subpackages reached as attributes, as Lightning's are (``pl.callbacks.ModelCheckpoint``).
_SUBPACKAGES = ("accelerators", "callbacks", "core", "loggers", "plugins", "utilities")


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"ddpkit.{name}")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ddpkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
