"""Keeping tests apart: no process group outlives the test that made it."""

from __future__ import annotations

__all__ = ["destroy_process_group_if_any"]


def destroy_process_group_if_any() -> bool:
    """Destroy the default process group if one exists; True when one did. A no-op where
    torch.distributed is unavailable."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    if not dist.is_available() or not dist.is_initialized():
        return False
    dist.destroy_process_group()
    return True
