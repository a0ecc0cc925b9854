"""Seeding every random generator a training run touches (Lightning's ``seed_everything``)."""

from __future__ import annotations

import os
import random

import torch

from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._rank_zero import rank_zero_info, rank_zero_warn
from ddpkit.utilities._rng import numpy_or_none

#: ranks started later read the seed here (their samplers shuffle alike)
ENV_SEED = "DDPKIT_SEED"
#: Lightning's name for the same (set too, so Lightning code and tools reading it agree)
ENV_LIGHTNING_SEED = "PL_GLOBAL_SEED"
#: "1" after ``seed_everything(..., workers=True)``: loaders' workers get seeded too
ENV_SEED_WORKERS = "PL_SEED_WORKERS"

MIN_SEED, MAX_SEED = 0, 2**32 - 1  # NumPy's range


def configured_seed() -> int:
    """The seed ``seed_everything`` exported (ddpkit's variable, else Lightning's), else 0."""
    for name in (ENV_SEED, ENV_LIGHTNING_SEED):
        value = os.environ.get(name, "")
        if value.strip().lstrip("-").isdigit():
            return int(value)
    return 0


def seed_everything(seed: int | None = None, workers: bool = False, verbose: bool = True) -> int:
    """Seed Python, torch (CPU and CUDA) and NumPy if installed; export the seed
    (``DDPKIT_SEED`` and Lightning's ``PL_GLOBAL_SEED``) so ranks started later seed the same
    way. ``seed=None`` takes the exported seed, else 0 (with a warning). ``workers=True``: every
    loader with workers and no ``worker_init_fn`` gets :func:`worker_init_function`, so each
    worker of each rank has its own reproducible seeds. ``verbose``: log "Seed set to N"."""
    if seed is None:
        exported = os.environ.get(ENV_SEED) or os.environ.get(ENV_LIGHTNING_SEED)
        if exported is None:
            seed = 0
            if verbose:
                rank_zero_warn(f"No seed found, seed set to {seed}", UserWarning)
        else:
            try:
                seed = int(exported)
            except ValueError:
                raise MisconfigurationError(
                    f"seed_everything(): the exported seed {exported!r} is not an int. Fix: "
                    f"seed_everything(42), or export {ENV_SEED}=42."
                ) from None
    elif isinstance(seed, bool) or not isinstance(seed, int):
        try:
            seed = int(seed)
        except (TypeError, ValueError):
            raise MisconfigurationError(
                f"seed_everything({seed!r}): a seed is an int from {MIN_SEED} to {MAX_SEED}. "
                f"Fix: seed_everything(42)."
            ) from None
    if not MIN_SEED <= seed <= MAX_SEED:
        raise MisconfigurationError(
            f"seed_everything({seed}): a seed must lie in [{MIN_SEED}, {MAX_SEED}] (NumPy's "
            f"range). Fix: seed_everything({seed % (MAX_SEED + 1)})."
        )
    if verbose:
        rank_zero_info(f"Seed set to {seed}")
    os.environ[ENV_SEED] = os.environ[ENV_LIGHTNING_SEED] = str(seed)
    os.environ[ENV_SEED_WORKERS] = str(int(bool(workers)))
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device, lazily
    np = numpy_or_none()
    if np is not None:
        np.random.seed(seed)
    return seed


def reset_seed() -> None:
    """Seed again with what :func:`seed_everything` exported, quietly; nothing if it never ran
    (Lightning's ``reset_seed``, which its DDP strategies call as each stage's ranks set up: every
    rank then starts the stage from the seed, whatever the script drew before ``fit``)."""
    # Lightning's variable first: seed_everything sets both, Lightning's own only its own, so it
    # holds the seed set last (and the reseed agrees with Lightning's own reset_seed).
    exported = os.environ.get(ENV_LIGHTNING_SEED) or os.environ.get(ENV_SEED)
    if exported is None:
        return
    workers = os.environ.get(ENV_SEED_WORKERS, "0") == "1"
    seed_everything(int(exported), workers=workers, verbose=False)


def worker_init_function(worker_id: int, rank: int = 0) -> None:  # pragma: no cover (a worker)
    """Lightning's ``pl_worker_init_function``: seeds torch, ``random`` and NumPy in a loader
    worker from the base seed, the worker id and the global rank, so workers (and ranks) draw
    different, reproducible numbers."""
    base_seed = torch.initial_seed() - worker_id
    seeds = _seed_sequence(base_seed, worker_id, rank, count=4)
    torch.manual_seed(seeds[0])
    random.seed((seeds[1] << 32) | seeds[2])
    np = numpy_or_none()
    if np is not None:
        np.random.seed(np.random.SeedSequence([base_seed, worker_id, rank]).generate_state(4))


def _seed_sequence(base_seed: int, worker_id: int, rank: int, count: int) -> list[int]:
    """Lightning's mixing (a MurmurHash3 finalizer, then an LCG), for the same worker seeds."""
    mask = (1 << 64) - 1
    combined = (base_seed << 32) | (worker_id << 16) | rank
    combined ^= combined >> 33
    combined = (combined * 0xFF51AFD7ED558CCD) & mask
    combined ^= combined >> 33
    combined = (combined * 0xC4CEB9FE1A85EC53) & mask
    combined ^= combined >> 33
    seeds = []
    for _ in range(count):
        combined = (combined * 6364136223846793005 + 1) & mask
        seeds.append(combined)
    return seeds
