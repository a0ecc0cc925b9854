"""``resnet18``: a small convolutional network of ResNet-18's shapes (3×H×W in, 1 000 logits
out), so the example's model trains in a test's time."""

from typing import Any

from torch import nn

__all__ = ["resnet18"]


def resnet18(pretrained: bool = False, **kwargs: Any) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=7, stride=8), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1000),
    )  # fmt: skip


def __getattr__(name: str) -> Any:
    """Any other model torchvision has (torchmetrics imports some when torchvision is there): a
    stand-in that says so when called."""
    if name.startswith("_"):
        raise AttributeError(name)

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"torchvision.models.{name}: not in the test's stand-in")

    return missing
