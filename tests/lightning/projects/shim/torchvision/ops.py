"""``torchvision.ops``: names only (torchmetrics imports some when torchvision is there)."""

from typing import Any

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(name)

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"torchvision.ops.{name}: not in the test's stand-in")

    return missing
