"""What the per-step path must not do (no timing here: the benchmark measures, these pin the
behaviour that makes it fast without changing what users see)."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit.trainer import _metrics as metrics_module
from ddpkit.trainer._metrics import MetricStore
from ddpkit.trainer._progress import POSTFIX_EVERY, ProgressBar

STEP = {"on_step": None, "on_epoch": None, "sync_dist": False, "batch_size": None}


def test_import_and_trainer_leave_torch_dynamo_to_the_user() -> None:
    # Creating an optimizer imports torch._dynamo (~2 s); ddpkit must not do it first or again.
    code = (
        "import sys, ddpkit\n"
        "ddpkit.Trainer(accelerator='cpu', devices=2, strategy='ddp_spawn', logger=False)\n"
        "ddpkit.Trainer(accelerator='cpu', devices=1, logger=False)\n"
        "print(sorted(m for m in sys.modules if m.startswith('torch._dynamo')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@contextmanager
def no_host_conversion() -> Iterator[None]:
    """Fail on any tensor -> Python number conversion (on a GPU, each waits for the stream)."""

    def refuse(self: torch.Tensor, *args: Any) -> Any:
        raise AssertionError("a logged value was converted to a Python number")

    with pytest.MonkeyPatch.context() as mp:
        for name in ("item", "__float__", "tolist"):
            mp.setattr(torch.Tensor, name, refuse)
        yield


def test_step_logging_converts_nothing_until_read() -> None:
    store = MetricStore()
    loss = torch.tensor(2.0, requires_grad=True) * 1
    with no_host_conversion():
        for _ in range(3):
            store.log("loss", loss, prog_bar=True, logger=True, reduce_fx="mean", **STEP)
    # the row keeps the tensor (detached); the loop converts it on a step that writes a row
    assert set(store.pending_step_row) == {"loss"}
    assert not store.pending_step_row["loss"].requires_grad
    assert store.progress_bar_metrics == {"loss": 2.0}  # converted when read
    assert not store.callback_metrics["loss"].requires_grad


@pytest.mark.parametrize("fx", ["mean", "sum", "max", "min"])
@pytest.mark.parametrize("sync_dist", [False, True])
def test_epoch_values_accumulated_on_the_device_equal_the_host_ones(
    fx: str, sync_dist: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = [(3.0, 2), (1.0, 1), (4.5, 3), (2.0, None)]

    def epoch(store: MetricStore) -> dict[str, float]:
        for v, n in values:
            store.log(
                "m",
                torch.tensor(v),
                prog_bar=True,
                logger=True,
                on_step=True,
                on_epoch=True,
                sync_dist=sync_dist,
                reduce_fx=fx,
                batch_size=n,
            )
        return store.end_epoch()

    host = epoch(MetricStore())
    # Pretend every value lives on a device: the same arithmetic, the same values.
    monkeypatch.setattr(metrics_module, "_on_device", lambda tensor: True)
    device_store = MetricStore()
    device = epoch(device_store)
    assert device == pytest.approx(host, rel=0, abs=0)
    assert device_store.callback_metrics["m"].dtype == torch.float32
    assert device_store.progress_bar_metrics == {"m_step": 2.0, "m_epoch": host["m_epoch"]}


def test_the_progress_bar_reads_metrics_only_when_it_redraws(tmp_path: Path) -> None:
    pytest.importorskip("tqdm")
    reads = 0

    def metrics() -> dict[str, float]:
        nonlocal reads
        reads += 1
        return {"loss": 1.0}

    class Terminal(io.StringIO):  # the bar draws in a terminal only
        def isatty(self) -> bool:
            return True

    bar = ProgressBar(True, file=Terminal())
    assert bar.enabled
    bar.start(3 * POSTFIX_EVERY, "epoch 0")
    for _ in range(3 * POSTFIX_EVERY):
        bar.update(metrics)
    assert reads == 3  # every POSTFIX_EVERY steps, not every step
    bar.close()
    assert reads == 4  # and once more for the epoch's summary line
    assert not ProgressBar(False, file=Terminal()).enabled


class _Logged(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.Linear(2, 1)
        self.losses: list[float] = []

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.mse_loss(self.layer(x), y)
        self.losses.append(float(loss.detach()))
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


@pytest.mark.parametrize("accumulate", [1, 2])
def test_csv_rows_hold_the_logged_values_of_their_steps(tmp_path: Path, accumulate: int) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(48, 2, generator=g)
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=2)
    model = _Logged()
    trainer = ddpkit.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        log_every_n_steps=5,
        accumulate_grad_batches=accumulate,
        enable_progress_bar=False,
        enable_checkpointing=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(model, data)
    with (tmp_path / "metrics.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("loss")]
    steps = 24 // accumulate
    # Lightning's step: a row carries the optimizer steps before its batch (global_step - 1).
    assert [int(r["step"]) for r in rows] == list(range(4, steps, 5))
    # A row holds the value logged by the last batch of its optimizer step.
    for r in rows:
        step = int(r["step"]) + 1
        assert float(r["loss"]) == pytest.approx(model.losses[step * accumulate - 1])
    assert float(trainer.callback_metrics["loss"]) == pytest.approx(model.losses[-1])
