"""Small helpers shared across ddpkit."""

from ddpkit.utilities._seed import seed_everything

__all__ = ["seed_everything"]
