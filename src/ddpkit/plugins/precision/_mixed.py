"""Mixed precision: autocast regions in float16 (with a gradient scaler) or bfloat16."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, ClassVar

import torch

from ddpkit.plugins.precision._base import PrecisionPlugin


class MixedPrecisionPlugin(PrecisionPlugin):
    """``"16-mixed"`` (CUDA only: float16 autocast and a ``GradScaler``) or ``"bf16-mixed"``
    (bfloat16 autocast, on CPU or CUDA, no scaler: bfloat16 has float32's exponent range)."""

    precision: ClassVar[str] = "16-mixed"

    def __init__(self, precision: str = "16-mixed") -> None:
        if precision not in ("16-mixed", "bf16-mixed"):
            from ddpkit.errors import MisconfigurationError

            raise MisconfigurationError(
                f"MixedPrecisionPlugin(precision={precision!r}): not a mixed precision. Choose "
                f"one of '16-mixed', 'bf16-mixed'."
            )
        self.precision = precision  # type: ignore[misc]
        self._scaler: torch.amp.GradScaler | None = None

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        """float16's gradient scaler, made on first use: building one touches CUDA, which a
        Trainer must not do at construction."""
        if self.precision == "16-mixed" and self._scaler is None:
            self._scaler = torch.amp.GradScaler(self.device_type)
        return self._scaler

    @property
    def dtype(self) -> torch.dtype:
        return torch.float16 if self.precision == "16-mixed" else torch.bfloat16

    @contextlib.contextmanager
    def forward_context(self) -> Iterator[None]:
        with torch.autocast(self.device_type, dtype=self.dtype):
            yield

    def backward(self, loss: torch.Tensor) -> None:
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def unscale_gradients(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        return {"scaler": self.scaler.state_dict()} if self.scaler is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])
