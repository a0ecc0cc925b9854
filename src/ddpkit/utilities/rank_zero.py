"""Messages that only rank zero shows, once."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

__all__ = ["is_rank_zero", "rank_zero_warn", "user_stacklevel"]

_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)


def is_rank_zero(env: Mapping[str, str] | None = None) -> bool:
    """True unless the environment names a non-zero rank (torchrun, srun or ddpkit's own)."""
    env = os.environ if env is None else env
    for key in ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK"):
        if env.get(key, "0") not in ("0", ""):
            return False
    return True


def user_stacklevel() -> int:
    """The stack level of the first frame outside ddpkit: the user's own line."""
    level = 1
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def rank_zero_warn(
    message: str, category: type[Warning], *, env: Mapping[str, str] | None = None
) -> None:
    """Warn on rank zero only (the other ranks run the same line), pointing at the user's
    line, so Python's own filters show it once per call site."""
    if not is_rank_zero(env):
        return
    warnings.warn(message, category, stacklevel=user_stacklevel())
