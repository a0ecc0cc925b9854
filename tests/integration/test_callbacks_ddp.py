"""Callbacks, loggers and checkpoints on two real gloo ranks, under subprocess DDP and spawn.

One fit per launcher, with what a Lightning user puts on a Trainer: ModelCheckpoint (best and
last), EarlyStopping, LearningRateMonitor, a recording callback, a CSV and a TensorBoard logger.
The ranks log different, unsynced validation scores (training_scripts/watched.py), so they
disagree: early stopping must end both on the same epoch, the best checkpoint must be rank
zero's best epoch, every rank must see the same hooks. Then ``test(ckpt_path="best")``,
``load_from_checkpoint`` and ``predict`` in the dataset's order.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch._dynamo
from training_scripts.watched import BEST_EPOCH, SCORES, STOP_EPOCH, N, Recording, Watched, loader

from ddpkit import Trainer
from ddpkit.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from ddpkit.core._saving import load_checkpoint
from ddpkit.loggers import CSVLogger, TensorBoardLogger

STEPS_PER_EPOCH = N // 2 // 4


def reference_hooks(tmp_path: Path) -> list[str]:
    """The same run in one process, with rank 1's scores (which decide the stop) for rank 0:
    the same saves, the same stop, so the same hooks (tests/callbacks checks these against
    Lightning's own). Half the data: a rank of two sees half of it."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    recorder = Recording(tmp_path)
    trainer = Trainer(**options(tmp_path / "reference", recorder))
    model = Watched(scores={0: SCORES[1]})
    trainer.fit(model, loader(N // 2), loader(N // 2))
    trainer.test(dataloaders=loader(N // 2), ckpt_path="best")
    trainer.predict(model, loader(N // 2, batch=3))
    return recorder.calls


def options(root: Path, recorder: Recording, **overrides: Any) -> dict[str, Any]:
    return {
        "max_epochs": 6,
        "default_root_dir": root,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 1,
        "log_every_n_steps": 2,
        "callbacks": [
            recorder,
            ModelCheckpoint(monitor="val_loss", save_last=True, filename="{epoch}-{val_loss:.2f}"),
            EarlyStopping(monitor="val_loss", patience=1),
            LearningRateMonitor(),
        ],
        **overrides,
    }


@pytest.mark.standalone
@pytest.mark.timeout(240)
@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_callbacks_and_loggers_agree_across_two_ranks(shared_dir: Path, strategy: str) -> None:
    pytest.importorskip("tensorboard")
    recorder = Recording(shared_dir)
    logs = shared_dir / "logs"
    trainer = Trainer(
        accelerator="cpu",
        devices=2,
        strategy=strategy,
        logger=[CSVLogger(logs, name="exp"), TensorBoardLogger(logs, name="tb")],
        **options(shared_dir / "root", recorder),
    )
    model = Watched()
    trainer.fit(model, loader(), loader())
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}
    [tested] = trainer.test(dataloaders=loader(), ckpt_path="best")
    predictions = trainer.predict(model, loader(batch=3))
    if trainer.global_rank != 0:
        return  # rank 1 re-ran this test (subprocess DDP): its hook file is written

    checkpoint, stopper = trainer.checkpoint_callback, trainer.early_stopping_callback
    # Early stopping: rank 1 asked at epoch 2, both ranks stopped there (3 epochs ran).
    assert stopper.stopped_epoch == STOP_EPOCH
    assert (trainer.current_epoch, trainer.global_step) == (
        STOP_EPOCH + 1,
        (STOP_EPOCH + 1) * STEPS_PER_EPOCH,
    )
    hooks = [stage_hooks(shared_dir / f"hooks-rank{r}.json", stages=3) for r in (0, 1)]
    assert hooks[0] == hooks[1]  # the same hooks, in the same order, on both ranks
    assert hooks[0].count("on_train_epoch_end") == STOP_EPOCH + 1
    assert hooks[0] == reference_hooks(shared_dir / "ref")

    # The best checkpoint is rank zero's best epoch (0.6 at epoch 1), with that epoch's weights.
    folder = logs / "exp" / "version_0" / "checkpoints"
    assert checkpoint.best_model_path == str(folder / f"epoch={BEST_EPOCH}-val_loss=0.60.ckpt")
    assert float(checkpoint.best_model_score) == pytest.approx(0.6)
    assert sorted(p.name for p in folder.iterdir()) == ["epoch=1-val_loss=0.60.ckpt", "last.ckpt"]
    best = load_checkpoint(checkpoint.best_model_path)
    assert (best["epoch"], best["global_step"]) == (BEST_EPOCH, (BEST_EPOCH + 1) * STEPS_PER_EPOCH)
    restored = Watched.load_from_checkpoint(checkpoint.best_model_path)
    assert restored.hparams == {"lr": 0.05, "width": 1, "scores": None}
    assert not torch.equal(restored.layer.weight, final["layer.weight"])  # not the final weights
    # Lightning 2.x writes last.ckpt with each save: epoch 2 saved nothing (0.7 > 0.6).
    last = Watched.load_from_checkpoint(checkpoint.last_model_path)
    assert torch.equal(last.layer.weight, restored.layer.weight)
    # As in Lightning, test(ckpt_path="best") left the best weights in the module.
    assert torch.equal(model.layer.weight, restored.layer.weight)

    # test(ckpt_path="best") ran the best epoch's weights (compare: a fresh test in-process).
    [expected] = Trainer(
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=shared_dir / "t",
    ).test(restored, loader())
    assert tested == pytest.approx(expected)

    # predict: every rank's shard gathered, in the dataset's order.
    single = [model(batch[0]).detach() for batch in loader(batch=3)]
    torch.testing.assert_close(torch.cat(predictions), torch.cat(single))

    # The loggers: one version, written by rank zero only; the scalars read back.
    assert sorted(p.name for p in (logs / "exp").iterdir()) == ["version_0"]
    assert sorted(p.name for p in (logs / "tb").iterdir()) == ["version_0"]
    assert trainer.logger.version == 0 and trainer.log_dir == str(logs / "exp" / "version_0")
    rows = (logs / "exp" / "version_0" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert {"train_loss", "val_loss", "lr-SGD", "test_loss"} <= set(header)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(logs / "tb" / "version_0"))
    events.Reload()
    val = events.Scalars("val_loss")
    assert [e.value for e in val] == pytest.approx(SCORES[0][: STOP_EPOCH + 1])
    # Lightning's step: the epoch's validation row carries the steps before its last batch
    assert [e.step for e in val] == [STEPS_PER_EPOCH * (e + 1) - 1 for e in range(STOP_EPOCH + 1)]
    assert "test_loss" in events.Tags()["scalars"] and "lr-SGD" in events.Tags()["scalars"]


def stage_hooks(path: Path, stages: int, timeout: float = 60.0) -> list[str]:
    """A rank's recorded hooks once its ``stages``-th teardown wrote them (bounded wait)."""
    deadline = time.monotonic() + timeout
    while True:
        calls: list[str] = json.loads(path.read_text()) if path.exists() else []
        if calls.count("teardown") >= stages:
            return calls
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} holds {calls.count('teardown')} of {stages} stages")
        time.sleep(0.1)
