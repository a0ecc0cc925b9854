"""Double precision: the model and floating-point inputs in float64."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from ddpkit.plugins.precision._base import PrecisionPlugin


class DoublePrecisionPlugin(PrecisionPlugin):
    precision: ClassVar[str] = "64-true"

    def convert_module(self, module: torch.nn.Module) -> torch.nn.Module:
        return module.double()

    def convert_input(self, data: Any) -> Any:
        if isinstance(data, torch.Tensor):
            return data.double() if data.is_floating_point() else data
        if isinstance(data, dict):
            return {k: self.convert_input(v) for k, v in data.items()}
        if isinstance(data, list | tuple):
            return type(data)(self.convert_input(v) for v in data)
        return data
