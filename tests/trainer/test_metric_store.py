"""What ``self.log`` records: step values, epoch means, names, and the cross-rank reduction."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from terminal import Terminal
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import MisconfigurationError, Trainer
from ddpkit.testing._distributed import DistInfo
from ddpkit.trainer._metrics import MetricStore


def log(store: MetricStore, name: str, value: Any, **kwargs: Any) -> None:
    options: dict[str, Any] = {
        "prog_bar": False,
        "logger": True,
        "on_step": None,
        "on_epoch": None,
        "sync_dist": False,
        "reduce_fx": "mean",
        "batch_size": None,
    }
    store.log(name, value, **{**options, **kwargs})


def test_training_logs_each_step_by_default() -> None:
    store = MetricStore()
    log(store, "loss", torch.tensor(2.0), prog_bar=True)
    log(store, "loss", torch.tensor(1.0), prog_bar=True)
    assert store.callback_metrics == {"loss": torch.tensor(1.0)}
    assert store.logged_metrics == {"loss": torch.tensor(1.0)}
    assert store.progress_bar_metrics == {"loss": 1.0}
    assert store.pending_step_row == {"loss": 1.0}
    assert store.end_epoch() == {}  # no epoch value unless asked


def test_evaluation_logs_the_epoch_mean_by_default() -> None:
    store = MetricStore()
    store.stage, store.in_batches = "validate", True
    log(store, "val", 1.0)
    log(store, "val", 3.0)
    assert store.callback_metrics == {}
    assert store.end_epoch() == {"val": 2.0}
    assert store.callback_metrics == {"val": torch.tensor(2.0)}


def test_step_and_epoch_publish_three_names() -> None:
    store = MetricStore()
    store.in_batches = True
    log(store, "loss", 4.0, on_step=True, on_epoch=True, prog_bar=True)
    log(store, "loss", 2.0, on_step=True, on_epoch=True, prog_bar=True)
    assert set(store.callback_metrics) == {"loss", "loss_step"}
    assert float(store.callback_metrics["loss"]) == 2.0  # the latest: the step value
    assert store.end_epoch() == {"loss_epoch": 3.0}
    assert {k: float(v) for k, v in store.callback_metrics.items()} == {
        "loss": 3.0,  # now the epoch value
        "loss_step": 2.0,
        "loss_epoch": 3.0,
    }
    assert set(store.logged_metrics) == {"loss_step", "loss_epoch"}
    assert store.progress_bar_metrics == {"loss_step": 2.0, "loss_epoch": 3.0}


def test_the_epoch_mean_is_weighted_by_batch_size() -> None:
    store = MetricStore()
    log(store, "acc", 1.0, on_epoch=True, on_step=False, batch_size=3)
    log(store, "acc", 0.0, on_epoch=True, on_step=False, batch_size=1)
    assert store.end_epoch() == {"acc": 0.75}


@pytest.mark.parametrize(("fx", "expected"), [("sum", 6.0), ("max", 3.0), ("min", 1.0)])
def test_reduce_fx(fx: str, expected: float) -> None:
    store = MetricStore()
    for v in (2.0, 3.0, 1.0):
        log(store, "m", v, on_step=False, on_epoch=True, reduce_fx=fx)
    assert store.end_epoch() == {"m": expected}


def test_logger_false_keeps_it_out_of_the_log_only() -> None:
    store = MetricStore()
    log(store, "x", 1.0, logger=False)
    assert set(store.callback_metrics) == {"x"}
    assert store.logged_metrics == {}
    assert store.pending_step_row == {}


def test_the_sanity_check_reaches_no_logger_row() -> None:
    """Lightning's: during the sanity check a callback reads its values in the callback, logged
    and progress-bar metrics (the loop resets them after it); no logger row is made of them."""
    store = MetricStore()
    store.stage, store.sanity = "validate", True
    log(store, "x", 1.0, on_step=True, on_epoch=True, prog_bar=True)
    assert store.eval_step_row == {}  # no step row
    assert store.end_epoch() == {}  # no epoch row
    assert store.callback_metrics == {"x": 1.0, "x_epoch": 1.0}
    assert store.logged_metrics == {"x_step": 1.0, "x_epoch": 1.0}
    assert store.progress_bar_metrics == {"x_step": 1.0, "x_epoch": 1.0}


def test_a_value_logged_while_the_epoch_closes_is_published_at_once() -> None:
    """What an epoch-end hook logs is in callback_metrics for the callbacks after it."""
    store = MetricStore()
    store.end_epoch(closing=True)
    log(store, "late", 3.0, on_step=False, on_epoch=True)
    assert float(store.callback_metrics["late"]) == 3.0
    assert store.end_epoch() == {"late": 3.0}
    store.in_batches = True  # the next epoch's batches
    log(store, "later", 4.0, on_step=False, on_epoch=True)
    assert "later" not in store.callback_metrics  # closed: published at the epoch's end again


def test_a_read_before_the_first_batch_publishes_the_epoch_values() -> None:
    """Lightning's: what on_train_start logs is read at on_train_epoch_start (reading the
    metrics publishes the epoch values logged so far); once a batch has run, a read publishes
    nothing until the epoch ends."""
    store = MetricStore()
    log(store, "start", 2.0, on_step=False, on_epoch=True, prog_bar=True)
    assert store._callback_metrics == {}  # published when read, not when logged
    assert store.progress_bar_metrics == {"start": 2.0}
    assert {k: float(v) for k, v in store.callback_metrics.items()} == {"start": 2.0}
    store.batch = (torch.zeros(4, 1),)
    log(store, "acc", 1.0, on_step=False, on_epoch=True)
    assert "acc" not in store.callback_metrics and "acc" not in store.logged_metrics
    assert store.end_epoch() == {"acc": 1.0, "start": 2.0}
    assert not store.in_batches  # the next epoch starts before its first batch again


def test_a_read_reduces_a_sync_dist_value_again_only_after_it_changed() -> None:
    """Lightning's result metric syncs when computed, then keeps the value until the next
    update: a second read before the first batch runs no collective (one rank reading alone
    then waits for no other)."""
    store, reduced = MetricStore(), []
    store.reduce = lambda tensor, fx: reduced.append(fx) or tensor
    log(store, "x", 2.0, on_step=False, on_epoch=True, sync_dist=True)
    assert float(store.callback_metrics["x"]) == 2.0
    assert float(store.callback_metrics["x"]) == 2.0
    assert len(reduced) == 1  # the weighted mean's sums and weights, once
    log(store, "x", 4.0, on_step=False, on_epoch=True, sync_dist=True)
    assert float(store.logged_metrics["x"]) == 3.0
    assert len(reduced) == 2


def test_a_new_epoch_starts_from_nothing() -> None:
    store = MetricStore()
    log(store, "x", 1.0, on_step=False, on_epoch=True)
    store.end_epoch()
    log(store, "x", 5.0, on_step=False, on_epoch=True)
    assert store.end_epoch() == {"x": 5.0}


def test_each_stage_closes_its_own_epoch() -> None:
    store = MetricStore()
    log(store, "t", 1.0, on_step=False, on_epoch=True)
    store.stage = "validate"
    log(store, "v", 2.0)
    assert store.end_epoch("validate") == {"v": 2.0}
    store.stage = "train"
    log(store, "t", 3.0, on_step=False, on_epoch=True)
    assert store.end_epoch() == {"t": 2.0}


def test_a_tensor_with_grad_is_detached() -> None:
    store = MetricStore()
    value = torch.tensor(2.0, requires_grad=True) * 1
    log(store, "x", value)
    assert not store.callback_metrics["x"].requires_grad


def test_only_scalars() -> None:
    with pytest.raises(MisconfigurationError, match=r"self.log\('x', <tensor of shape \(2,\)>\)"):
        log(MetricStore(), "x", torch.ones(2))


def test_an_unknown_reduce_fx() -> None:
    with pytest.raises(
        MisconfigurationError, match=r"reduce_fx='median'\): choose one of 'max', 'mean'"
    ):
        log(MetricStore(), "x", 1.0, reduce_fx="median")


# -- across real ranks ------------------------------------------------------------------------


class RankMetrics(ddpkit.Module):
    """Logs rank-dependent values in validation; both ranks see the same data loader."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        rank = float(self.global_rank)
        # rank 0: weight 1, rank 1: weight 4 -> weighted mean over ranks 0.8, not 0.5
        self.log("weighted", rank, batch_size=1 + 3 * self.global_rank, sync_dist=True)
        self.log("total", rank + 1, reduce_fx="sum", sync_dist=True)
        self.log("highest", rank, reduce_fx="max", sync_dist=True)
        self.log("lowest", rank, reduce_fx="min", sync_dist=True)
        self.log("own", rank)
        self.log("step_synced", rank, on_step=True, on_epoch=False, sync_dist=True)


@pytest.mark.distributed(world_size=2, timeout=120)
def test_sync_dist_reduces_across_ranks(
    dist: DistInfo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A real Trainer in each rank of an initialized gloo group (it uses the group as given)."""
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)  # the bar draws in a terminal only
    trainer = Trainer(
        accelerator="cpu", devices=2, strategy="ddp", enable_progress_bar=True,
        default_root_dir=tmp_path,
    )  # fmt: skip
    assert trainer.global_rank == dist.rank
    data = DataLoader(TensorDataset(torch.zeros(4, 1)), batch_size=1)  # 2 batches per rank
    [metrics] = trainer.validate(RankMetrics(), data)
    expected_total = 2 * (1 + 2)  # two batches per rank, summed over both ranks
    assert metrics["weighted"] == pytest.approx(0.8)
    assert metrics["total"] == expected_total
    assert (metrics["highest"], metrics["lowest"]) == (1.0, 0.0)
    assert metrics["own"] == dist.rank  # not synced: each rank's own
    # A step value, the mean of the ranks: for the loggers; callbacks read an evaluation's
    # epoch values only (Lightning's callback_metrics).
    assert float(trainer.logged_metrics["step_synced"]) == 0.5
    assert "step_synced" not in trainer.callback_metrics
    assert torch.distributed.is_initialized()  # the test's group is left to the test
    # The progress bar is rank zero's alone.
    assert ("validate" in terminal.getvalue()) is (dist.rank == 0)
