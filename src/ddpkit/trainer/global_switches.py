"""Process-wide torch settings a stage holds while it runs (``Trainer(deterministic=...)``,
``Trainer(benchmark=...)``), and gives back afterwards: a later stage or test must not inherit
them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from ddpkit.trainer.config import LoopConfig

__all__ = ["benchmark", "deterministic"]


@contextlib.contextmanager
def deterministic(enabled: bool | str, device: torch.device) -> Iterator[None]:
    """``Trainer(deterministic=True)`` (or "warn"): deterministic algorithms for the stage, then
    the process's own setting again (it is global state; a later stage or test must not inherit
    it). cuBLAS is deterministic only with a fixed workspace, so a CUDA stage also sets
    ``CUBLAS_WORKSPACE_CONFIG`` unless the user did."""
    if not enabled:
        yield
        return
    previous = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    set_cublas = device.type == "cuda" and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    if set_cublas:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True, warn_only=enabled == "warn")
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=warn_only)
        if set_cublas:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


@contextlib.contextmanager
def benchmark(config: LoopConfig) -> Iterator[None]:
    """``Trainer(benchmark=...)``: cuDNN's autotuner for the stage (off when deterministic)."""
    wanted = config.benchmark
    if wanted is None and config.deterministic:
        wanted = False
    if wanted is None:
        yield
        return
    previous = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = wanted
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = previous
