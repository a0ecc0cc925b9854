"""Validations that need several decisions at once. Each raises with the call and a fix."""

from __future__ import annotations

from typing import Any

from ddpkit.errors import MisconfigurationError

__all__ = ["check_gpu_available", "check_num_nodes", "check_precision", "check_sync_batchnorm"]


def check_num_nodes(call: str, num_nodes: Any) -> int:
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise MisconfigurationError(f"{call}: num_nodes={num_nodes!r} must be an int ≥ 1.")
    return num_nodes


def check_gpu_available(call: str, source: str, cuda_device_count: int) -> None:
    if cuda_device_count == 0:
        raise MisconfigurationError(
            f"{call}: {source} asks for a GPU, but no GPU is visible "
            f"(torch.cuda.is_available() is False, or CUDA_VISIBLE_DEVICES hides them). "
            f"Fix: pass accelerator='cpu' (or 'auto'), or run on a machine with CUDA."
        )


def check_precision(call: str, precision: str, accelerator: str) -> None:
    if precision == "16-mixed" and accelerator == "cpu":
        raise MisconfigurationError(
            f"{call}: precision='16-mixed' needs a GPU (float16 autocast with a gradient "
            f"scaler), but the accelerator is CPU. Fix: pass precision='bf16-mixed' on CPU."
        )


def check_sync_batchnorm(call: str, sync_batchnorm: Any, training_type: str) -> None:
    if not isinstance(sync_batchnorm, bool):
        raise MisconfigurationError(f"{call}: sync_batchnorm={sync_batchnorm!r} must be a bool.")
