"""Validations that need several decisions at once. Each raises with the call and a fix."""

from __future__ import annotations

from ddpkit.connector._types import MAX_WORLD_SIZE
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.training_type._ddp_options import BACKENDS
from ddpkit.utilities._reprs import safe_repr
from ddpkit.utilities._suggest import choices, did_you_mean


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


def check_world_size(call: str, processes_per_node: int, num_nodes: int) -> int:
    world_size = processes_per_node * num_nodes
    if world_size > MAX_WORLD_SIZE:
        raise MisconfigurationError(
            f"{call}: devices({processes_per_node}) × num_nodes({num_nodes}) = {world_size} "
            f"ranks, more than ddpkit runs ({MAX_WORLD_SIZE}). Fix: check num_nodes and devices."
        )
    return world_size


def check_backend(call: str, value: str, accelerator: str, source: str) -> None:
    name = value.strip().lower()
    if name not in BACKENDS:
        raise MisconfigurationError(
            f"{call}: {source}={safe_repr(value)} is not a torch.distributed backend"
            f"{did_you_mean(name, BACKENDS)}. Choose one of {choices(BACKENDS)}, or unset it."
        )
    if name == "nccl" and accelerator == "cpu":
        raise MisconfigurationError(
            f"{call}: {source}={safe_repr(value)} asks for NCCL, which runs on CUDA GPUs only, "
            "but the "
            f"accelerator is CPU. Fix: use 'gloo' on CPU, or accelerator='gpu'."
        )
