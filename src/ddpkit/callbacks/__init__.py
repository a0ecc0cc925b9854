"""Callbacks: Lightning's hooks, and the callbacks every run needs."""

from ddpkit.callbacks.base import Callback
from ddpkit.callbacks.checkpoint import ModelCheckpoint
from ddpkit.callbacks.early_stopping import EarlyStopping, EarlyStoppingReason
from ddpkit.callbacks.lr_monitor import LearningRateMonitor
from ddpkit.callbacks.summary import ModelSummary
from ddpkit.callbacks.timer import Timer

__all__ = [
    "Callback",
    "EarlyStopping",
    "EarlyStoppingReason",
    "LearningRateMonitor",
    "ModelCheckpoint",
    "ModelSummary",
    "Timer",
]
