"""``pytorch_lightning.metrics`` of Lightning 1.x, which moved to torchmetrics in 1.5.

``Accuracy()`` is 1.x's — no ``task`` argument: each batch's task is read from the data as 1.x
read it (:func:`~ddpkit.lightning._metrics.functional.task_of`) — counted on torchmetrics'
``Metric`` (its states sync across ranks, ``self.log(..., metric)`` computes and resets it);
every other name is torchmetrics' class of that name, and ``functional`` holds the functions. Each
warns once, naming the torchmetrics spelling.
"""

from __future__ import annotations

from typing import Any

import torch
import torchmetrics

from ddpkit.lightning._metrics import functional
from ddpkit.lightning._metrics.functional import _moved, task_of, warn_moved

__all__ = ["Accuracy", "functional"]


class Accuracy(torchmetrics.Metric):
    """Lightning 1.2–1.4's ``Accuracy(threshold=0.5, top_k=None, subset_accuracy=False)``: the
    share of right predictions over every sample (every label of multilabel data, or with
    ``subset_accuracy`` the samples whose labels are all right), with ``top_k`` for
    probabilities over classes."""

    # the states add_state makes (torchmetrics types them as tensor or module)
    correct: torch.Tensor
    total: torch.Tensor

    def __init__(
        self,
        threshold: float = 0.5,
        top_k: int | None = None,
        subset_accuracy: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("compute_on_step", None)  # gone from torchmetrics; it only chose a return
        super().__init__(**kwargs)
        warn_moved(
            "pytorch_lightning.metrics.Accuracy()",
            "torchmetrics.Accuracy(task=..., num_classes=...)",
        )
        self.threshold, self.top_k, self.subset_accuracy = threshold, top_k, subset_accuracy
        self.add_state("correct", default=torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0), dist_reduce_fx="sum")

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        task = task_of(preds, target)["task"]
        if task == "multiclass" and preds.is_floating_point():
            best = preds.topk(self.top_k or 1, dim=1).indices
            right = (best == target.unsqueeze(1)).any(dim=1)
        elif preds.is_floating_point():
            right = (preds >= self.threshold).to(target.dtype) == target
            if task == "multilabel" and self.subset_accuracy:
                right = right.all(dim=1)
        else:
            right = preds == target
        self.correct += right.sum()
        self.total += right.numel()

    def compute(self) -> torch.Tensor:
        return self.correct.float() / self.total


def __getattr__(name: str) -> Any:
    return _moved(torchmetrics, "pytorch_lightning.metrics", name)
