"""A stand-in for torchvision (which does not install beside this torch) in the project tests:
the datasets of Lightning's 1.x examples, synthetic and of the same shapes (MNIST: 1×28×28 images
in [0, 1], 60 000 / 10 000 of them, labels 0–9; an image folder: 3×224×224 after the example's
crop, 1 000 classes), the transforms they call, a small ``resnet18`` (same input and output
shapes), and ``utils.make_grid``. Samples are made from their index, so nothing is held in
memory and every rank sees the same data. The dist-info beside this package makes
``RequirementCache("torchvision")`` (Lightning's ``_TORCHVISION_AVAILABLE``) true."""

from torchvision import datasets, models, ops, transforms, utils

__all__ = ["datasets", "models", "ops", "transforms", "utils"]
__version__ = "0.0.0+ddpkit"
