"""``StageContext``: one stage on one rank — the pieces every loop needs, looked up once."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ddpkit.accelerators._base import LoaderHooks
from ddpkit.callbacks._dispatch import Dispatcher, transfer_hooks
from ddpkit.core._batch import move_to_device
from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.trainer._config import LoopConfig
from ddpkit.trainer._data import distribute
from ddpkit.trainer._protocols import LoopTrainer
from ddpkit.trainer._state import LoopState
from ddpkit.utilities._rank_zero import rank_zero_info
from ddpkit.utilities._seed import configured_seed


def on_host(batch: Any) -> bool:
    """The common CPU case, answered without rebuilding the batch: a tensor, or a list or tuple
    of tensors, already on the host (what a DataLoader yields)."""
    if type(batch) is torch.Tensor:
        return batch.is_cpu
    if type(batch) is list or type(batch) is tuple:
        for value in batch:  # noqa: SIM110 (all() over a generator costs twice as much)
            if type(value) is not torch.Tensor or not value.is_cpu:
                return False
        return True
    return False


class StageContext:
    """The trainer (what hooks receive), its state and config, the plugins, the module, the
    dispatcher, and the batch path."""

    def __init__(
        self,
        trainer: LoopTrainer,
        state: LoopState,
        config: LoopConfig,
        plugin: TrainingTypePlugin,
        precision: PrecisionPlugin,
        model: nn.Module,
    ) -> None:
        self.trainer, self.state, self.config = trainer, state, config
        self.plugin, self.precision, self.model = plugin, precision, model
        self.device = plugin.root_device
        self.seed = configured_seed()
        self.dispatch = Dispatcher(trainer, model, state.callbacks, state.metrics)
        # float32 leaves inputs and the forward pass alone: the loops then skip those calls
        # (a generator-based context manager costs ~3 µs a step).
        kind = type(precision)
        self.plain_input = kind.convert_input is PrecisionPlugin.convert_input
        self.plain_forward = kind.forward_context is PrecisionPlugin.forward_context
        self._on_cpu = self.device.type == "cpu"
        self._transfer = transfer_hooks(state.datamodule, model)

    def info(self, message: str) -> None:
        """An INFO line, said by global rank zero."""
        if self.plugin.is_global_zero:
            rank_zero_info(message)

    def prepare(self, loader: Any, *, train: bool, kind: str, predict: bool = False) -> Any:
        """The loader this rank iterates: its shard (``distribute``), then what the training
        type's and the accelerator's 1.x ``on_reset_<kind>_dataloader`` hooks make of it
        (``kind``: "train", "val", "test" or "predict")."""
        prepared = distribute(
            loader,
            rank=self.plugin.global_rank,
            world_size=self.plugin.world_size,
            train=train,
            seed=self.seed,
            predict=predict,
            use_distributed_sampler=self.config.use_distributed_sampler,
            overfit=train and bool(self.config.overfit_batches),
        )
        hook = f"on_reset_{kind}_dataloader"
        for owner in (self.plugin, self.trainer.accelerator):
            if isinstance(owner, LoaderHooks):
                owner._lightning_module = self.model  # what a 1.x hook reads
            prepared = getattr(owner, hook)(prepared)
        return prepared

    def batch(self, batch: Any, dataloader_idx: int = 0) -> Any:
        """A batch on this rank's device, in the precision's input format."""
        if self._transfer is not None:
            return self._hooked_batch(batch, dataloader_idx)
        if not (self._on_cpu and on_host(batch)):
            batch = move_to_device(batch, self.device)
        return batch if self.plain_input else self.precision.convert_input(batch)

    def _hooked_batch(self, batch: Any, dataloader_idx: int) -> Any:
        assert self._transfer is not None
        before, transfer, after = self._transfer
        if not self.plain_input:
            batch = self.precision.convert_input(batch)
        if before is not None:
            batch = before(batch, dataloader_idx)
        batch = (
            transfer(batch, self.device, dataloader_idx)
            if transfer is not None
            else move_to_device(batch, self.device)
        )
        return after(batch, dataloader_idx) if after is not None else batch
