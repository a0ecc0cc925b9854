"""``DataModule``: the data of a run in one object, as Lightning's ``LightningDataModule``.

The loop accepts any object with this protocol (a ``LightningDataModule`` too): ``prepare_data``
runs once per node (local rank 0; once per job with ``prepare_data_per_node = False``) while the
other ranks wait; ``setup(stage)`` and ``teardown(stage)`` run on every rank; the
``*_dataloader()`` methods give the loaders.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

from ddpkit._lightning_surface import LightningCounterpart
from ddpkit.core._hooks import DataHooks
from ddpkit.core._hparams import HyperparametersMixin
from ddpkit.core._saving import HPARAMS_KEY, init_kwargs, load_checkpoint, load_hparams_file

D = TypeVar("D", bound="DataModule")


class DataModule(LightningCounterpart, HyperparametersMixin, DataHooks):
    """Subclass it and implement the ``*_dataloader()`` methods a stage needs
    (``train_dataloader`` for ``fit``, ``val_dataloader`` for validation, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Lightning's takes (and ignores) any arguments: a subclass's super().__init__(**kw)
        # under cooperative inheritance works here too.
        #: the Trainer running a stage with this DataModule (set by the loop), else None
        self.trainer: Any = None

    def state_dict(self) -> dict[str, Any]:
        """State to store in checkpoints (under the class's qualified name)."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    @classmethod
    def load_from_checkpoint(
        cls: type[D],
        checkpoint_path: str | os.PathLike[str],
        map_location: Any = None,
        hparams_file: str | os.PathLike[str] | None = None,
        weights_only: bool = True,
        **kwargs: Any,
    ) -> D:
        """A new ``cls`` from the hyperparameters stored with a checkpoint (a DataModule's
        hyperparameters are stored when it called ``save_hyperparameters``). ``map_location``
        is ``torch.load``'s (default: the CPU)."""
        checkpoint = load_checkpoint(
            checkpoint_path, weights_only=weights_only, map_location=map_location or "cpu"
        )
        hparams = dict(checkpoint.get(f"datamodule_{HPARAMS_KEY}") or {})
        if hparams_file is not None:
            hparams = load_hparams_file(hparams_file)
        hparams.update(kwargs)
        datamodule = cls(**init_kwargs(cls, hparams))
        state = checkpoint.get(cls.__qualname__)
        if state:
            datamodule.load_state_dict(state)
        return datamodule
