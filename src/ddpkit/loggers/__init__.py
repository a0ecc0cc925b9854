"""Loggers: where logged metrics and hyperparameters go (Lightning's interface and layout)."""

from ddpkit.loggers.base import Logger
from ddpkit.loggers.csv import CSVLogger
from ddpkit.loggers.tensorboard import TensorBoardLogger

__all__ = ["CSVLogger", "Logger", "TensorBoardLogger"]
