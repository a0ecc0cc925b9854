"""Synthetic datasets of the real ones' shapes, each sample made from its index."""

import os
from typing import Any

import torch
from torch.utils.data import Dataset

__all__ = ["MNIST", "ImageFolder"]


class _Synthetic(Dataset):
    shape: tuple[int, ...] = ()
    classes = 10

    def __init__(self, length: int, offset: int, transform: Any = None) -> None:
        self.length, self.offset, self.transform = length, offset, transform

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        generator = torch.Generator().manual_seed(self.offset + index)
        image = torch.rand(self.shape, generator=generator)
        label = int(torch.randint(self.classes, (), generator=generator))
        return (self.transform(image) if self.transform else image), label


class MNIST(_Synthetic):
    """``MNIST(root, train=True, transform=None, download=False)``: 60 000 training or 10 000 test
    images of 1×28×28 in [0, 1] (as ``ToTensor`` gives them), labels 0–9."""

    shape = (1, 28, 28)

    def __init__(self, root: str, train: bool = True, transform: Any = None,
                 target_transform: Any = None, download: bool = False) -> None:  # fmt: skip
        super().__init__(60_000 if train else 10_000, 0 if train else 10**6, transform)


class ImageFolder(_Synthetic):
    """``ImageFolder(root, transform)``: 1 000 classes of 3×256×256 images ("train" folders: 2 048
    of them, others 512); the examples' crops bring them to 3×224×224."""

    shape = (3, 256, 256)
    classes = 1000

    def __init__(self, root: str, transform: Any = None) -> None:
        train = os.path.basename(os.path.normpath(root)) == "train"
        super().__init__(2048 if train else 512, 0 if train else 10**6, transform)
