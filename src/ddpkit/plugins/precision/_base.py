"""Full precision (float32): the default numeric format, and the interface of every precision."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import torch


class PrecisionPlugin:
    """float32 everywhere. Subclasses change the module, the autocast region and the step."""

    #: the canonical name: "32-true", "64-true", "16-mixed" or "bf16-mixed"
    precision: ClassVar[str] = "32-true"

    def setup(self, device_type: str) -> None:
        """Called once by the connector with the accelerator's device type ("cpu" or "cuda")."""
        self.device_type = device_type

    def convert_module(self, module: torch.nn.Module) -> torch.nn.Module:
        return module

    def convert_input(self, data: Any) -> Any:
        return data

    @contextlib.contextmanager
    def forward_context(self) -> Iterator[None]:
        yield

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def unscale_gradients(self, optimizer: torch.optim.Optimizer) -> None:
        """Before gradient clipping: bring gradients back to their true scale."""

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(precision={self.precision!r})"
