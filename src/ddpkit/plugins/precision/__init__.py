"""Precision plugins: 32-true (default), 64-true, 16-mixed, bf16-mixed."""

from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.plugins.precision._double import DoublePrecisionPlugin
from ddpkit.plugins.precision._mixed import MixedPrecisionPlugin

__all__ = ["DoublePrecisionPlugin", "MixedPrecisionPlugin", "PrecisionPlugin"]
