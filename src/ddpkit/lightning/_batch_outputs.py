"""The step outputs Lightning 1.x's training hooks received, made from Lightning 2.x's.

Lightning 2.x passes ``on_train_batch_end`` its optimization loop's output as it is: the step's
dict, ``{}`` for a step that returned ``None``, and under ddpkit's several 1.x optimizers
(:mod:`ddpkit.lightning._multi_optimizer`) a dict by optimizer index. Lightning 1.9.5
(``TrainingEpochLoop._prepare_outputs_training_batch_end``) passed:

- with one optimizer, the step's dict, and ``[]`` for a step that returned ``None``;
- with several, a list of the outputs of the optimizers that ran, in their order: an optimizer
  that did not run at that batch (``"frequency"``, an ``optimizer_step`` that skipped the closure)
  or whose step returned ``None`` left out, ``[]`` when none is left.

and ``training_epoch_end(outputs)`` with several optimizers
(``_prepare_outputs_training_epoch_end``) ``outputs[batch][optimizer]``: the batches' lists
padded into an array of shape (batches, optimizers), squeezed as NumPy squeezes (one batch: that
batch's list alone; one optimizer: the outputs alone), the optimizers that did not run and the
batches left empty taken out (:func:`epoch_end_outputs`). That is 1.6–1.9's layout; 1.0–1.5
passed ``outputs[optimizer][batch]``, and ddpkit follows 1.9.

:func:`one_x_batch_outputs` installs, for one fit of a 1.x module (:func:`is_1x_module`), a
stand-in for each optimization loop's ``run`` that hands Lightning's hooks 1.x's form; a module
written for Lightning 2.x keeps 2.x's.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import pytorch_lightning as pl

from ddpkit.lightning._epoch_end import EPOCH_END_HOOKS
from ddpkit.lightning._module import LightningModule as LightningModule1x


def is_1x_module(model: Any) -> bool:
    """A module written for Lightning 1.x: built on ddpkit's 1.x ``LightningModule`` (what
    ``pytorch_lightning.LightningModule`` is under ``python -m ddpkit.lightning`` and the porting
    rule), or with a hook only 1.x had (an ``*_epoch_end(outputs)``; ``optimizer_idx`` is the
    caller's ``several``)."""
    if not isinstance(model, pl.LightningModule):
        return False
    return type.__instancecheck__(LightningModule1x, model) or any(
        callable(getattr(type(model), name, None)) for name in EPOCH_END_HOOKS
    )


def batch_end_outputs(output: Any, several: bool) -> Any:
    """1.9.5's ``on_train_batch_end(outputs)`` from Lightning 2.x's: ``several`` optimizers give
    a dict by optimizer index (see the module)."""
    if not output:
        return []
    if several:
        return [output[index] for index in sorted(output)]
    return output


def epoch_end_outputs(batches: list[dict[int, Any]], count: int) -> list[Any]:
    """1.9.5's ``training_epoch_end(outputs)`` of ``count`` optimizers, from each batch's outputs
    by optimizer index (``{}`` for a batch none of them gave one). 1.9.5 padded the batches into
    an array of shape (batches, 1, optimizers) — every batch that gave an output is a full row,
    ``None`` where an optimizer gave none — squeezed each dimension of length one, and took the
    ``None`` out, then the empty lists of the top level."""
    if not any(batches):
        return []
    rows = [[batch[index] for index in sorted(batch)] for batch in batches]
    if count == 1:  # the optimizer dimension squeezed: the outputs themselves
        return [row[0] for row in rows if row]
    if len(rows) == 1:  # the batch dimension squeezed: that batch's outputs
        return rows[0]
    return [row for row in rows if row]


def _one_x_run(part: Any, several: bool, *args: Any, **kwargs: Any) -> Any:
    """An optimization loop's ``run`` for one fit: Lightning's, its output in 1.x's form."""
    output = type(part).run(part, *args, **kwargs)
    return batch_end_outputs(output, several and len(part.trainer.optimizers) > 1)


@contextlib.contextmanager
def one_x_batch_outputs(trainer: pl.Trainer, model: Any, several: bool) -> Iterator[None]:
    """For one fit of a 1.x module (``several``: one whose ``training_step`` takes 1.x's
    ``optimizer_idx``): ``on_train_batch_end`` gets 1.9.5's ``outputs``."""
    if not (several or is_1x_module(model)):
        yield
        return
    loop = trainer.fit_loop.epoch_loop
    parts = (loop.automatic_optimization, loop.manual_optimization)
    for part in parts:
        vars(part)["run"] = functools.partial(_one_x_run, part, several)
    try:
        yield
    finally:
        for part in parts:
            vars(part).pop("run", None)
