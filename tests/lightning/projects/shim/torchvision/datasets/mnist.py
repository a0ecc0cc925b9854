"""``torchvision.datasets.mnist``: where 1.x's autoencoder example imports ``MNIST`` from."""

from torchvision.datasets import MNIST

__all__ = ["MNIST"]
