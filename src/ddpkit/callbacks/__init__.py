"""Callbacks: Lightning's hooks, and the callbacks every run needs."""

from typing import Any

from ddpkit._lightning_surface import refuse_import
from ddpkit.callbacks.base import Callback
from ddpkit.callbacks.checkpoint import ModelCheckpoint
from ddpkit.callbacks.early_stopping import EarlyStopping, EarlyStoppingReason
from ddpkit.callbacks.finetuning import BackboneFinetuning, BaseFinetuning
from ddpkit.callbacks.lr_monitor import LearningRateMonitor
from ddpkit.callbacks.summary import ModelSummary
from ddpkit.callbacks.timer import Timer

__all__ = [
    "BackboneFinetuning",
    "BaseFinetuning",
    "Callback",
    "EarlyStopping",
    "EarlyStoppingReason",
    "LearningRateMonitor",
    "ModelCheckpoint",
    "ModelSummary",
    "Timer",
]


def __getattr__(name: str) -> Any:
    # A class of Lightning's that ddpkit does not have: refused with the way.
    refuse_import("ddpkit.callbacks", name)
    raise AttributeError(f"module 'ddpkit.callbacks' has no attribute {name!r}")
