"""The hooks a module (and a DataModule) may override, with Lightning's names and signatures.

Every hook here does nothing (or the default thing); the loop calls only the hooks a class
overrides — it finds them once per stage, so an unused hook costs nothing per step.
"""

from __future__ import annotations

from typing import Any

import torch


class ModelHooks:
    """The loop's hooks, in the order a ``fit`` calls them (see docs/training.md)."""

    def on_fit_start(self) -> None: ...
    def on_fit_end(self) -> None: ...
    def on_train_start(self) -> None: ...
    def on_train_end(self) -> None: ...
    def on_validation_start(self) -> None: ...
    def on_validation_end(self) -> None: ...
    def on_test_start(self) -> None: ...
    def on_test_end(self) -> None: ...
    def on_predict_start(self) -> None: ...
    def on_predict_end(self) -> None: ...

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> int | None:
        """Return -1 to skip the rest of this epoch."""
        return None

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None: ...
    def on_validation_batch_start(
        self, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None: ...
    def on_validation_batch_end(
        self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None: ...
    def on_test_batch_start(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None: ...
    def on_test_batch_end(
        self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None: ...
    def on_predict_batch_start(
        self, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None: ...
    def on_predict_batch_end(
        self, outputs: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None: ...

    def on_validation_model_zero_grad(self) -> None:
        """Before validation inside ``fit``: free the gradients (as Lightning does)."""
        zero_grad = getattr(self, "zero_grad", None)
        if zero_grad is not None:
            zero_grad(set_to_none=True)

    def on_validation_model_eval(self) -> None:
        getattr(self, "eval")()  # noqa: B009 (the nn.Module this mixes into)

    def on_validation_model_train(self) -> None:
        getattr(self, "train")()  # noqa: B009

    def on_test_model_eval(self) -> None:
        getattr(self, "eval")()  # noqa: B009

    def on_test_model_train(self) -> None:
        getattr(self, "train")()  # noqa: B009

    def on_predict_model_eval(self) -> None:
        getattr(self, "eval")()  # noqa: B009

    def on_train_epoch_start(self) -> None: ...
    def on_train_epoch_end(self) -> None: ...
    def on_validation_epoch_start(self) -> None: ...
    def on_validation_epoch_end(self) -> None: ...
    def on_test_epoch_start(self) -> None: ...
    def on_test_epoch_end(self) -> None: ...
    def on_predict_epoch_start(self) -> None: ...
    def on_predict_epoch_end(self) -> None: ...
    def on_before_zero_grad(self, optimizer: torch.optim.Optimizer) -> None: ...
    def on_before_backward(self, loss: torch.Tensor) -> None: ...
    def on_after_backward(self) -> None: ...
    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None: ...
    def configure_model(self) -> None:
        """Build layers here (after ``setup``, before the checkpoint is restored)."""


class DataHooks:
    """Where the data comes from, shared by the module and the DataModule."""

    #: ``prepare_data`` once per node (local rank 0) — False: once per job (global rank 0)
    prepare_data_per_node: bool = True

    def prepare_data(self) -> None:
        """Download or write data: runs on one process per node, before ``setup``."""

    def setup(self, stage: str) -> None:
        """On every rank, before the stage (``stage`` is fit, validate, test or predict)."""

    def teardown(self, stage: str) -> None:
        """On every rank, after the stage."""

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return batch

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        from ddpkit.core._batch import move_to_device

        return move_to_device(batch, device)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return batch


class CheckpointHooks:
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Add to (or change) the checkpoint dict before it is written."""

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Read what :meth:`on_save_checkpoint` added, before the weights are loaded."""
