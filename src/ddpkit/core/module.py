"""``Module``: an ``nn.Module`` with LightningModule-style hooks and ``self.log``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from ddpkit.trainer.trainer import Trainer

__all__ = ["Module"]


class Module(nn.Module):
    """Subclass it and implement ``training_step`` and ``configure_optimizers``.

    Any ``nn.Module`` with the same hook names trains too (duck typing); ``Module`` adds
    ``self.log``, ``self.trainer``, ``self.device`` and the ranks.
    """

    def __init__(self) -> None:
        super().__init__()
        self._trainer: Trainer | None = None

    # -- what the trainer gives the module -----------------------------------------------------

    @property
    def trainer(self) -> Trainer:
        if self._trainer is None:
            raise RuntimeError(f"{type(self).__name__} is not attached to a Trainer")
        return self._trainer

    @trainer.setter
    def trainer(self, trainer: Trainer | None) -> None:
        self._trainer = trainer

    @property
    def device(self) -> torch.device:
        for p in self.parameters():
            return p.device
        if self._trainer is not None:
            return self._trainer.root_device
        return torch.device("cpu")

    @property
    def global_rank(self) -> int:
        return self._trainer.global_rank if self._trainer is not None else 0

    @property
    def local_rank(self) -> int:
        return self._trainer.local_rank if self._trainer is not None else 0

    # -- hooks -------------------------------------------------------------------------------

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor | Mapping[str, Any]:
        raise NotImplementedError(f"{type(self).__name__}.training_step is not implemented")

    def configure_optimizers(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.configure_optimizers is not implemented")

    # -- logging -----------------------------------------------------------------------------

    def log(
        self,
        name: str,
        value: Any,
        prog_bar: bool = False,
        logger: bool = True,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        sync_dist: bool = False,
        reduce_fx: str = "mean",
        batch_size: int | None = None,
    ) -> None:
        """Record a metric. In ``training_step`` it defaults to every step; in evaluation to the
        epoch mean. ``sync_dist=True`` reduces it across ranks (``reduce_fx``: mean, sum, max,
        min) so every rank sees the same value."""
        if self._trainer is None:
            return
        self._trainer._metrics.log(
            name,
            value,
            prog_bar=prog_bar,
            logger=logger,
            on_step=on_step,
            on_epoch=on_epoch,
            sync_dist=sync_dist,
            reduce_fx=reduce_fx,
            batch_size=batch_size,
        )

    def log_dict(self, dictionary: Mapping[str, Any], **kwargs: Any) -> None:
        for name, value in dictionary.items():
            self.log(name, value, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        # Spawned ranks get the trainer through the launcher, not through the module.
        state = self.__dict__.copy()
        state["_trainer"] = None
        return state
