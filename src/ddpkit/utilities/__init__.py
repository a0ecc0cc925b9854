"""Small helpers shared across ddpkit."""

from ddpkit.utilities.seed import seed_everything

__all__ = ["seed_everything"]
