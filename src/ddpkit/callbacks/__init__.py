"""Callbacks: Lightning's hooks, and the callbacks every run needs."""

from typing import Any

from ddpkit._lightning_surface import refuse_import
from ddpkit.callbacks._base import Callback
from ddpkit.callbacks._checkpoint import ModelCheckpoint
from ddpkit.callbacks._early_stopping import EarlyStopping, EarlyStoppingReason
from ddpkit.callbacks._finetuning import BackboneFinetuning, BaseFinetuning
from ddpkit.callbacks._lr_monitor import LearningRateMonitor
from ddpkit.callbacks._summary import ModelSummary, summarize
from ddpkit.callbacks._timer import Timer

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
    "summarize",
]


def __getattr__(name: str) -> Any:
    # A class of Lightning's that ddpkit does not have: refused with the way.
    refuse_import("ddpkit.callbacks", name)
    raise AttributeError(f"module 'ddpkit.callbacks' has no attribute {name!r}")
