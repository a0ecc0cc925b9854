"""The transforms the examples build: the images are tensors already, so each keeps the shape
it promises (crops resize by interpolation) and normalizes as torchvision's does."""

from typing import Any

import torch
from torch.nn import functional as F

__all__ = ["CenterCrop", "Compose", "Normalize", "RandomHorizontalFlip", "RandomResizedCrop",
           "Resize", "ToTensor"]  # fmt: skip


class Compose:
    def __init__(self, transforms: list[Any]) -> None:
        self.transforms = transforms

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.float()


class Normalize:
    def __init__(self, mean: Any, std: Any) -> None:
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class _Size:
    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x[None], size=(self.size, self.size), mode="bilinear")[0]


class RandomResizedCrop(_Size):
    pass


class Resize(_Size):
    pass


class CenterCrop(_Size):
    pass


class RandomHorizontalFlip:
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x
