"""``ddpkit.lightning.metrics``: Lightning 1.x's ``pytorch_lightning.metrics`` (moved to
torchmetrics in 1.5), with 1.x's values: the examples of 1.2's own docstrings, and 1.2's rules
(``metrics/classification/helpers.py``: a probability at the threshold counts as positive; global
accuracy over every label of multilabel data unless ``subset_accuracy``)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
import torch

pytest.importorskip("torchmetrics", reason="the `lightning` extra is not installed")

from ddpkit import DDPKitDeprecationWarning
from ddpkit.lightning import metrics
from ddpkit.lightning.metrics import Accuracy, functional


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(functional, "_warned", set())  # each name warns once a process
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DDPKitDeprecationWarning)
        yield


T = torch.tensor
#: (preds, target, keywords, 1.x's accuracy)
CASES = [
    # 1.2's docstring examples.
    (T([0, 2, 1, 3]), T([0, 1, 2, 3]), {}, 0.5),
    (T([[0.1, 0.9, 0], [0.3, 0.1, 0.6], [0.2, 0.5, 0.3]]), T([0, 1, 2]), {"top_k": 2}, 2 / 3),
    # Probabilities over classes: the most likely one.
    (T([[0.1, 0.9, 0], [0.3, 0.1, 0.6], [0.2, 0.5, 0.3]]), T([1, 2, 2]), {}, 2 / 3),
    # Binary probabilities: at the threshold is positive (1.x's `preds >= threshold`).
    (T([0.5, 0.2, 0.7, 0.4]), T([1, 0, 1, 1]), {}, 0.75),
    (T([0.5, 0.2, 0.7, 0.4]), T([1, 0, 1, 1]), {"threshold": 0.3}, 1.0),
    # Multilabel: every label counts, or (subset_accuracy) whole samples.
    (T([[0.9, 0.1], [0.6, 0.6]]), T([[1, 0], [1, 0]]), {}, 0.75),
    (T([[0.9, 0.1], [0.6, 0.6]]), T([[1, 0], [1, 0]]), {"subset_accuracy": True}, 0.5),
]


@pytest.mark.parametrize(("preds", "target", "keywords", "expected"), CASES)
def test_accuracy_as_1x_computed_it(
    preds: torch.Tensor, target: torch.Tensor, keywords: dict[str, object], expected: float
) -> None:
    assert float(functional.accuracy(preds, target, **keywords)) == pytest.approx(expected)  # type: ignore[arg-type]
    metric = Accuracy(**keywords)  # type: ignore[arg-type]
    half = len(preds) // 2  # two batches, counted together
    metric.update(preds[:half], target[:half])
    metric.update(preds[half:], target[half:])
    assert float(metric.compute()) == pytest.approx(expected)


def test_each_name_warns_once_naming_its_torchmetrics_spelling() -> None:
    with pytest.warns(DDPKitDeprecationWarning) as seen:
        warnings.simplefilter("always", DDPKitDeprecationWarning)
        functional.accuracy(T([0, 1]), T([0, 1]))
        functional.accuracy(T([0, 1]), T([0, 1]))
        assert metrics.MeanSquaredError is not None  # another name: torchmetrics' own
    texts = [str(w.message) for w in seen]
    assert len(texts) == 2
    assert "torchmetrics.functional.accuracy(preds, target, task='multiclass'" in texts[0]
    assert "pytorch_lightning.metrics.MeanSquaredError" in texts[1]
    assert "torchmetrics.MeanSquaredError" in texts[1]


def test_a_name_neither_has_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="neither ddpkit nor torchmetrics"):
        functional.no_such_metric  # noqa: B018
