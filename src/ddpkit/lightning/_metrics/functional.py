"""``pytorch_lightning.metrics.functional`` of Lightning 1.x: moved to ``torchmetrics.functional``.

``accuracy(preds, target)`` is 1.x's (no ``task``: it is read from the data, as 1.x read it) and
runs torchmetrics' ``accuracy`` with that task; every other name is torchmetrics' own function of
that name. Each warns once, naming the torchmetrics spelling.
"""

from __future__ import annotations

from typing import Any

import torch
import torchmetrics.functional

from ddpkit.errors import DDPKitDeprecationWarning
from ddpkit.utilities._rank_zero import rank_zero_warn

_warned: set[str] = set()


def warn_moved(old: str, new: str) -> None:
    """One ``DDPKitDeprecationWarning`` per name and process: ``old`` is now ``new``."""
    if old in _warned:
        return
    _warned.add(old)
    rank_zero_warn(
        f"{old}: removed in Lightning 1.5 (moved to torchmetrics); ddpkit runs its torchmetrics "
        f"spelling, {new}.",
        DDPKitDeprecationWarning,
    )


def task_of(preds: torch.Tensor, target: torch.Tensor) -> dict[str, Any]:
    """The torchmetrics task (and its size) 1.x read from the data: probabilities with a class
    dimension are multiclass, probabilities shaped like the target are binary (or multilabel,
    one column per label), labels are multiclass over the classes seen."""
    if preds.is_floating_point() and preds.ndim == target.ndim + 1:
        return {"task": "multiclass", "num_classes": preds.shape[1]}
    if preds.is_floating_point():
        if preds.ndim == 1:
            return {"task": "binary"}
        return {"task": "multilabel", "num_labels": preds.shape[1]}
    classes = int(max(preds.max().item(), target.max().item())) + 1 if preds.numel() else 2
    return {"task": "multiclass", "num_classes": max(classes, 2)}


def accuracy(
    preds: torch.Tensor,
    target: torch.Tensor,
    threshold: float = 0.5,
    top_k: int | None = None,
    subset_accuracy: bool = False,
    num_classes: int | None = None,
) -> torch.Tensor:
    """Lightning 1.2–1.4's ``accuracy``: the micro-averaged accuracy over every sample (or, for
    multilabel data with ``subset_accuracy=True``, the samples whose labels are all right)."""
    task = task_of(preds, target)
    if num_classes is not None and task["task"] == "multiclass":
        task["num_classes"] = num_classes
    shown = ", ".join(f"{k}={v!r}" for k, v in task.items())
    warn_moved(
        "pytorch_lightning.metrics.functional.accuracy(preds, target)",
        f"torchmetrics.functional.accuracy(preds, target, {shown})",
    )
    if task["task"] in ("binary", "multilabel") and preds.is_floating_point():
        # 1.x's threshold: `preds >= threshold` is positive (torchmetrics' is `>`, after a
        # sigmoid for values outside [0, 1]); torchmetrics then counts labels.
        preds = (preds >= threshold).long()
    if task["task"] == "multilabel" and subset_accuracy:
        return torchmetrics.functional.classification.multilabel_exact_match(
            preds, target, num_labels=task["num_labels"]
        )
    return torchmetrics.functional.accuracy(
        preds, target, threshold=threshold, top_k=top_k or 1, **task
    )


def _moved(module: Any, old: str, name: str) -> Any:
    """A module ``__getattr__``: ``old.name`` is ``name`` of torchmetrics' ``module``, with
    :func:`warn_moved`."""
    found = None if name.startswith("_") else getattr(module, name, None)
    if found is None:
        raise AttributeError(f"{old}.{name}: neither ddpkit nor {module.__name__} has it")
    warn_moved(f"{old}.{name}", f"{module.__name__}.{name}")
    return found


def __getattr__(name: str) -> Any:
    return _moved(torchmetrics.functional, "pytorch_lightning.metrics.functional", name)
