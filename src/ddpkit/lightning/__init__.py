"""Lightning code on ddpkit: Lightning 1.x's Trainer calls, run by Lightning 2.x.

``ddpkit.lightning.Trainer`` is a ``pytorch_lightning.Trainer`` that also takes Lightning 1.x's
device flags (resolved by ddpkit's connector) and 1.x's other keywords (each mapped onto its 2.x
spelling or refused with the replacement named). Needs the ``lightning`` extra
(``pip install ddpkit[lightning]``); ``import ddpkit`` never imports Lightning.

This module is ``pytorch_lightning`` as a 1.x script knew it: besides ddpkit's names below, every
name of ``pytorch_lightning`` (``LightningModule``, ``Callback``, ``seed_everything``,
``callbacks``, ``loggers`` ...) is Lightning's own, so ``import ddpkit.lightning as pl`` can
replace ``import pytorch_lightning as pl``. The names that differ from Lightning 2.x's are the 1.x
ones: ``Trainer``, ``LightningDataModule`` (1.x's argparse class methods), ``LightningCLI``
(1.x's, at ``pytorch_lightning.utilities.cli`` in 1.x), ``metrics`` (``pytorch_lightning.metrics``,
now torchmetrics), ``DDPPlugin`` and ``DDPSpawnPlugin`` (``pytorch_lightning.plugins``).
"""

from __future__ import annotations

import importlib
from typing import Any

try:
    import pytorch_lightning
except ModuleNotFoundError as err:  # pragma: no cover - the extra is installed in the suite
    raise ModuleNotFoundError(
        "ddpkit.lightning runs on Lightning 2.x, which is not installed. "
        "Fix: pip install 'ddpkit[lightning]' (pytorch-lightning>=2.5,<3)."
    ) from err

from ddpkit.lightning.datamodule import LightningDataModule
from ddpkit.lightning.supervised import SupervisedDDPStrategy
from ddpkit.lightning.trainer import Trainer
from ddpkit.plugins import DDPPlugin, DDPSpawnPlugin

__all__ = [
    "DDPPlugin",
    "DDPSpawnPlugin",
    "LightningCLI",
    "LightningDataModule",
    "SupervisedDDPStrategy",
    "Trainer",
    "metrics",
]


def __getattr__(name: str) -> Any:
    # Imported on first use: LightningCLI pulls in Lightning's CLI, metrics torchmetrics.
    if name == "LightningCLI":
        from ddpkit.lightning.cli import LightningCLI

        return LightningCLI
    if name == "metrics":
        return importlib.import_module("ddpkit.lightning.metrics")
    if not name.startswith("__") and hasattr(pytorch_lightning, name):
        return getattr(pytorch_lightning, name)
    raise AttributeError(f"module 'ddpkit.lightning' has no attribute {name!r}, nor has Lightning")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *dir(pytorch_lightning)})
