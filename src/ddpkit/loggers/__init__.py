"""Loggers: where logged metrics and hyperparameters go (Lightning's interface and layout)."""

from typing import Any

from ddpkit._lightning_surface import refuse_import
from ddpkit.loggers._base import Logger
from ddpkit.loggers._csv import CSVLogger
from ddpkit.loggers._tensorboard import TensorBoardLogger

__all__ = ["CSVLogger", "Logger", "TensorBoardLogger"]


def __getattr__(name: str) -> Any:
    # A class of Lightning's that ddpkit does not have: refused with the way.
    refuse_import("ddpkit.loggers", name)
    raise AttributeError(f"module 'ddpkit.loggers' has no attribute {name!r}")
