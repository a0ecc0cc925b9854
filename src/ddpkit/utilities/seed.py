"""Seeding every random generator a training run touches."""

from __future__ import annotations

import os
import random

import torch

__all__ = ["ENV_SEED", "seed_everything"]

#: ranks started later read the seed here (their samplers shuffle alike)
ENV_SEED = "DDPKIT_SEED"


def seed_everything(seed: int = 0) -> int:
    """Seed Python, torch (CPU and CUDA) and NumPy if installed; export ``PL_GLOBAL_SEED``-style
    ``DDPKIT_SEED`` so ranks started later seed the same way."""
    os.environ[ENV_SEED] = str(seed)
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device, lazily
    try:
        import numpy as np
    except ImportError:
        pass
    else:
        np.random.seed(seed % (2**32))
    return seed
