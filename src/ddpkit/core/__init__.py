"""The module users subclass."""

from ddpkit.core.module import Module

__all__ = ["Module"]
