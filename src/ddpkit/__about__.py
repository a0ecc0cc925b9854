"""The version, kept apart so that reading it imports nothing."""

__all__ = ["__version__"]

__version__ = "0.1.0"
