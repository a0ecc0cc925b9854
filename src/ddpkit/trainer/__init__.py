"""The Trainer and the loop it runs on every rank."""

from ddpkit.trainer._trainer import Trainer

__all__ = ["Trainer"]
