"""Real 2-rank runs for what issue 13 found: a second spawn stage whose previous port is taken,
a fit from a worker thread that then exits, and 1.x's find_unused_parameters default."""

from __future__ import annotations

import errno
import os
import socket
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import ChildFailedError, DDPKitDeprecationWarning, DDPPlugin, Trainer


def _loader() -> DataLoader[Any]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)


class PortRecorder(ddpkit.Module):
    """Writes the rendezvous port each stage used (as the rank sees it) to ``out``."""

    def __init__(self, out: str) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 1)
        self.out = out

    def _record(self, stage: str) -> None:
        if self.global_rank == 0:
            Path(self.out, f"{stage}.port").write_text(os.environ["MASTER_PORT"])

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        self._record("fit")
        return nn.functional.mse_loss(self.layer(batch[0]), batch[1])

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self._record("validate")
        self.log("val_loss", nn.functional.mse_loss(self.layer(batch[0]), batch[1]))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


@pytest.mark.timeout(180)
def test_a_second_spawn_stage_does_not_need_the_first_stages_port(tmp_path: Path) -> None:
    with pytest.warns(DDPKitDeprecationWarning):
        trainer = Trainer(
            accelerator="ddp_cpu", num_processes=2, max_epochs=1, limit_train_batches=2,
            limit_val_batches=1, num_sanity_val_steps=0, enable_progress_bar=False,
            logger=False, enable_checkpointing=False, default_root_dir=tmp_path,
        )  # fmt: skip
    model = PortRecorder(str(tmp_path))
    trainer.fit(model, _loader())
    first = int((tmp_path / "fit.port").read_text())
    # Someone takes the freed port before the next stage: the next stage must not need it.
    with socket.socket() as squatter:
        # The first stage's connections may linger in TIME_WAIT; the squatter may still bind.
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            squatter.bind(("127.0.0.1", first))
            squatter.listen(1)
        except OSError as err:  # another process uses the port already: just as taken
            if err.errno != errno.EADDRINUSE:
                raise
        result = trainer.validate(model, _loader())
    assert int((tmp_path / "validate.port").read_text()) != first
    assert "val_loss" in result[0]


@pytest.mark.standalone
@pytest.mark.timeout(240)
def test_fits_from_worker_threads_that_exit_keep_their_ranks(shared_dir: Path) -> None:
    trainer = Trainer(
        accelerator="cpu", devices=2, strategy="ddp", max_epochs=1, limit_train_batches=2,
        enable_progress_bar=False, logger=False, enable_checkpointing=False,
        default_root_dir=shared_dir,
    )  # fmt: skip
    model = Plain()
    errors: list[BaseException] = []

    def fit() -> None:
        try:
            trainer.fit(model, _loader())
        except BaseException as exc:  # the test reports it on the main thread
            errors.append(exc)

    for _ in range(2):  # the second fit finds the ranks the first thread's fit started
        worker = threading.Thread(target=fit)
        worker.start()
        worker.join(timeout=120)
        assert not worker.is_alive()
        assert errors == []
    assert trainer.global_step == 2  # each fit counts from zero: the second ran all its steps


class Plain(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return nn.functional.mse_loss(self.layer(batch[0]), batch[1])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class WithAnUnusedLayer(ddpkit.Module):
    """A 1.x model with a parameter that takes no part in the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(4, 1)
        self.unused = nn.Linear(4, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return nn.functional.mse_loss(self.used(batch[0]), batch[1])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _trainer(tmp_path: Path, **flags: Any) -> Trainer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DDPKitDeprecationWarning)
        return Trainer(
            **flags, max_epochs=1, limit_train_batches=3, enable_progress_bar=False,
            logger=False, enable_checkpointing=False, default_root_dir=tmp_path,
        )  # fmt: skip


@pytest.mark.timeout(180)
def test_legacy_spellings_keep_1x_find_unused_parameters_and_train(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, accelerator="ddp_cpu", num_processes=2)
    trainer.fit(WithAnUnusedLayer(), _loader())
    assert trainer.global_step == 3


@pytest.mark.timeout(180)
def test_the_modern_default_names_the_fix_for_an_unused_parameter(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, accelerator="cpu", devices=2, strategy="ddp_spawn")
    with pytest.raises(ChildFailedError) as err:
        trainer.fit(WithAnUnusedLayer(), _loader())
    message = str(err.value)
    # ddpkit's words first, with the parameters by name and the fix for this plugin; torch's
    # paragraph about DDP's internals (by index) only as its first sentence, last.
    root = err.value.root_cause.note
    assert root.startswith(
        "raised UnusedParametersError: DDPSpawnPlugin(find_unused_parameters=False): "
        "unused.weight and unused.bias took no part in the loss of training_step on rank "
    ), root
    assert "Fix: pass strategy='ddp_spawn_find_unused_parameters_true'" in message
    assert message.index("Fix: pass strategy=") < message.index(
        "(torch's error: Expected to have finished reduction in the prior iteration"
    )
    assert "Parameter indices" not in message


def test_a_1x_style_ddp_plugin_keeps_1x_default() -> None:
    assert DDPPlugin().find_unused_parameters is True
