"""ModelCheckpoint: Lightning's names, the best k by a monitored metric, last.ckpt, the triggers,
and the checkpoints' contents (one process; tests/integration has 2 ranks)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
from callback_models import BATCHES, Scripted, data, options

import ddpkit
from ddpkit import MisconfigurationError, Trainer
from ddpkit.callbacks import ModelCheckpoint
from ddpkit.callbacks._checkpoint import format_checkpoint_name
from ddpkit.core._saving import load_checkpoint
from ddpkit.loggers import CSVLogger
from ddpkit.trainer._lightning_loops import read_position

SCORES = [0.5, 0.2, 0.4, 0.3, 0.6]  # best epoch 1, second best 3


@pytest.mark.parametrize(
    ("template", "metrics", "auto", "name"),
    [
        ("{epoch}", {"epoch": 0}, True, "epoch=0"),
        ("{epoch:03d}", {"epoch": 5}, True, "epoch=005"),
        (
            "{epoch}-{val_loss:.2f}",
            {"epoch": 2, "val_loss": 0.123456},
            True,
            "epoch=2-val_loss=0.12",
        ),
        (
            "epoch={epoch}-validation_loss={val_loss:.2f}",
            {"epoch": 2, "val_loss": 0.123456},
            False,
            "epoch=2-validation_loss=0.12",
        ),
        ("{missing:d}", {}, True, "missing=0"),
        (None, {"epoch": 1, "step": 8}, True, "epoch=1-step=8"),
        (
            "sample-{epoch:02d}-{val/loss:.2f}",
            {"epoch": 3, "val/loss": 0.5},
            False,
            "sample-03-0.50",
        ),
    ],
)
def test_names_follow_lightnings_template_rules(
    template: str | None, metrics: dict[str, Any], auto: bool, name: str
) -> None:
    """The examples of Lightning's own ``format_checkpoint_name`` docstring."""
    values = {k: torch.tensor(v) for k, v in metrics.items()}
    assert format_checkpoint_name(template, values, auto) == name


def fit(
    tmp_path: Path, callback: ModelCheckpoint, epochs: int = 5, **kwargs: Any
) -> tuple[Trainer, Scripted]:
    model = Scripted(SCORES)
    trainer = Trainer(
        default_root_dir=tmp_path, callbacks=[callback], **options(max_epochs=epochs, **kwargs)
    )
    trainer.fit(model, data(), data())
    return trainer, model


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_best_checkpoint_is_the_best_epochs(tmp_path: Path) -> None:
    callback = ModelCheckpoint(
        dirpath=tmp_path / "ck", monitor="val_loss", filename="{epoch}-{val_loss:.2f}"
    )
    trainer, model = fit(tmp_path, callback)
    assert trainer.checkpoint_callback is callback
    assert callback.best_model_path == str(tmp_path / "ck" / "epoch=1-val_loss=0.20.ckpt")
    assert float(callback.best_model_score) == pytest.approx(0.2)
    assert names(tmp_path / "ck") == ["epoch=1-val_loss=0.20.ckpt"]  # save_top_k=1 keeps one
    saved = load_checkpoint(callback.best_model_path)
    assert (saved["epoch"], saved["global_step"]) == (1, 2 * BATCHES)
    for key, value in model.weights[1].items():
        assert torch.equal(saved["state_dict"][key], value), key
    assert not torch.equal(saved["state_dict"]["layer.weight"], model.layer.weight)


def test_top_k_keeps_the_k_best_and_last_is_the_latest(tmp_path: Path) -> None:
    callback = ModelCheckpoint(
        dirpath=tmp_path / "ck", monitor="val_loss", save_top_k=2, save_last=True
    )
    trainer, model = fit(tmp_path, callback)
    assert names(tmp_path / "ck") == ["epoch=1-step=8.ckpt", "epoch=3-step=16.ckpt", "last.ckpt"]
    assert sorted(Path(p).name for p in callback.best_k_models) == [
        "epoch=1-step=8.ckpt",
        "epoch=3-step=16.ckpt",
    ]
    assert Path(callback.kth_best_model_path).name == "epoch=3-step=16.ckpt"
    assert float(callback.kth_value) == pytest.approx(0.3)
    assert callback.last_model_path == str(tmp_path / "ck" / "last.ckpt")
    # Lightning 2.x writes last.ckpt with every save: epoch 4 (0.6) made no top-2 save, so the
    # last one is epoch 3's.
    last = load_checkpoint(callback.last_model_path)
    assert (last["epoch"], last["global_step"]) == (3, 4 * BATCHES)
    for key, value in model.weights[3].items():
        assert torch.equal(last["state_dict"][key], value)
    assert trainer.checkpoint_path == callback.last_model_path


@pytest.mark.parametrize(("mode", "best"), [("min", 1), ("max", 4)])
def test_mode_decides_which_end_is_best(tmp_path: Path, mode: str, best: int) -> None:
    callback = ModelCheckpoint(dirpath=tmp_path, monitor="val_loss", mode=mode, filename="{epoch}")
    fit(tmp_path, callback)
    assert Path(callback.best_model_path).name == f"epoch={best}.ckpt"


def test_save_top_k_minus_one_keeps_every_epoch_and_zero_none(tmp_path: Path) -> None:
    every = ModelCheckpoint(
        dirpath=tmp_path / "all", monitor="val_loss", save_top_k=-1, filename="{epoch}"
    )
    fit(tmp_path / "a", every)
    assert names(tmp_path / "all") == [f"epoch={e}.ckpt" for e in range(5)]
    none = ModelCheckpoint(
        dirpath=tmp_path / "none", monitor="val_loss", save_top_k=0, save_last=True
    )
    fit(tmp_path / "b", none)
    assert names(tmp_path / "none") == ["last.ckpt"]
    assert none.best_model_path == ""


def test_every_n_epochs_and_every_n_train_steps(tmp_path: Path) -> None:
    epochs = ModelCheckpoint(
        dirpath=tmp_path / "e", every_n_epochs=2, save_top_k=-1, filename="{epoch}"
    )
    fit(tmp_path / "a", epochs)
    assert names(tmp_path / "e") == ["epoch=1.ckpt", "epoch=3.ckpt"]
    steps = ModelCheckpoint(
        dirpath=tmp_path / "s", every_n_train_steps=3, save_top_k=-1, filename="{step}"
    )
    fit(tmp_path / "b", steps, epochs=2)
    assert names(tmp_path / "s") == ["step=3.ckpt", "step=6.ckpt"]
    saved = load_checkpoint(tmp_path / "s" / "step=3.ckpt")
    position = read_position(saved)  # mid-epoch: a resume goes on in epoch 0, after 3 batches
    assert (position["epochs_completed"], position["epoch_batches"]) == (0, 3)


def test_a_time_interval_saves_on_the_step_it_passes(tmp_path: Path) -> None:
    callback = ModelCheckpoint(
        dirpath=tmp_path / "t", train_time_interval=timedelta(0), save_top_k=-1, filename="{step}"
    )
    fit(tmp_path, callback, epochs=1)
    assert names(tmp_path / "t") == [f"step={s}.ckpt" for s in range(1, BATCHES + 1)]


def test_the_default_directory_follows_the_first_logger(tmp_path: Path) -> None:
    """Lightning's rule: <save_dir>/<name>/<version>/checkpoints, else default_root_dir."""
    trainer = Trainer(
        default_root_dir=tmp_path / "root",
        logger=CSVLogger(tmp_path / "logs", name="exp"),
        **options(max_epochs=1),
    )
    trainer.fit(Scripted(), data())
    assert trainer.checkpoint_callback.dirpath == str(
        tmp_path / "logs" / "exp" / "version_0" / "checkpoints"
    )
    assert names(tmp_path / "logs" / "exp" / "version_0" / "checkpoints") == [
        f"epoch=0-step={BATCHES}.ckpt"
    ]
    plain = Trainer(default_root_dir=tmp_path / "plain", logger=False, **options(max_epochs=1))
    plain.fit(Scripted(), data())
    assert names(tmp_path / "plain" / "checkpoints") == [f"epoch=0-step={BATCHES}.ckpt"]


def test_a_default_checkpoint_is_written_every_epoch_so_a_crash_loses_one_epoch(
    tmp_path: Path,
) -> None:
    seen: list[list[str]] = []

    class Watches(Scripted):
        def on_train_epoch_start(self) -> None:
            folder = tmp_path / "checkpoints"
            seen.append(names(folder) if folder.exists() else [])

    trainer = Trainer(default_root_dir=tmp_path, **options(max_epochs=3))
    trainer.fit(Watches(), data())
    step = BATCHES
    assert seen == [[], [f"epoch=0-step={step}.ckpt"], [f"epoch=1-step={2 * step}.ckpt"]]


def test_an_existing_name_gets_a_version_suffix(tmp_path: Path) -> None:
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "epoch=0.ckpt").write_bytes(b"an earlier run's file")
    callback = ModelCheckpoint(dirpath=tmp_path / "ck", filename="{epoch}")
    with pytest.warns(UserWarning, match="exists and is not empty"):
        fit(tmp_path, callback, epochs=1)
    assert names(tmp_path / "ck") == ["epoch=0-v1.ckpt", "epoch=0.ckpt"]
    assert (tmp_path / "ck" / "epoch=0.ckpt").read_bytes() == b"an earlier run's file"


def test_a_monitor_that_was_never_logged_names_the_logged_ones(tmp_path: Path) -> None:
    callback = ModelCheckpoint(dirpath=tmp_path, monitor="val_acc")
    with pytest.raises(MisconfigurationError, match=r"monitor='val_acc'.*'val_loss'"):
        fit(tmp_path, callback, epochs=1)


def test_the_callback_state_travels_in_the_checkpoint_and_comes_back(tmp_path: Path) -> None:
    first = ModelCheckpoint(dirpath=tmp_path / "ck", monitor="val_loss", save_last=True)
    fit(tmp_path, first, epochs=2)
    saved = load_checkpoint(first.last_model_path)
    assert saved["callbacks"][first.state_key]["best_model_path"] == first.best_model_path
    again = ModelCheckpoint(dirpath=tmp_path / "ck", monitor="val_loss", save_last=True)
    model = Scripted(SCORES)
    trainer = Trainer(default_root_dir=tmp_path, callbacks=[again], **options(max_epochs=2))
    with pytest.warns(UserWarning, match=r"checkpoint directory .*ck exists and is not empty"):
        trainer.fit(model, data(), data(), ckpt_path=first.last_model_path)
    assert again.best_model_path == first.best_model_path
    assert float(again.best_model_score) == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # Lightning 1.4's phrases, which its tests match (test_model_checkpoint_mode_options ...)
        ({"mode": "best"}, r"ModelCheckpoint\(mode='best'\): `mode` can be min, max but got best"),
        ({"save_top_k": -2}, r"ModelCheckpoint\(save_top_k=-2\): Must be >= -1"),
        ({"save_top_k": 3}, r"ModelCheckpoint\(save_top_k=3, monitor=None\) is not a valid .*Fix"),
        (
            {"every_n_epochs": 2, "every_n_train_steps": 5},
            r"every_n_train_steps=5, every_n_epochs=2\): Combination of parameters",
        ),
        ({"every_n_epochs": -1}, r"every_n_epochs=-1\): Must be >= 0"),
        ({"every_n_train_steps": -3}, r"every_n_train_steps=-3\): Must be >= 0"),
        ({"save_last": "yes"}, r"save_last='yes'"),
        ({"train_time_interval": 5}, r"train_time_interval=5.*timedelta"),
        # issue 22: each of these failed after an epoch's work (or with a raw Python error)
        ({"dirpath": 3}, r"ModelCheckpoint\(dirpath=3\): pass the folder.*Fix: "),
        ({"filename": "{epoch"}, r"\(filename='\{epoch'\): the template does not format.*Fix"),
        ({"filename": "{val_loss:03d}"}, r"Unknown format code 'd' for object of type 'float'"),
        ({"filename": 3}, r"ModelCheckpoint\(filename=3\): pass a name template"),
        ({"monitor": 3}, r"ModelCheckpoint\(monitor=3\): pass a logged metric's name"),
    ],
)
def test_bad_arguments_are_refused_with_a_fix(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(MisconfigurationError, match=message):
        ModelCheckpoint(**kwargs)


def test_a_file_as_dirpath_is_refused_when_built(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("")
    with pytest.raises(MisconfigurationError, match=r"a_file'\): that is a file, not a folder"):
        ModelCheckpoint(dirpath=tmp_path / "a_file")
    with pytest.raises(MisconfigurationError, match=r"Trainer.fit: ModelCheckpoint\(dirpath=.*"
                       r"but '.*a_file' is a file, so that folder cannot exist"):  # fmt: skip
        fit(tmp_path, ModelCheckpoint(dirpath=tmp_path / "a_file" / "sub"), epochs=1)


def test_to_yaml_writes_the_best_k(tmp_path: Path) -> None:
    """Lightning 1.4's test_model_checkpoint_to_yaml (ddpkit had no to_yaml)."""
    yaml = pytest.importorskip("yaml")
    callback = ModelCheckpoint(dirpath=tmp_path / "ck", monitor="val_loss", save_top_k=2)
    fit(tmp_path, callback, epochs=3)
    callback.to_yaml()
    written = yaml.safe_load((tmp_path / "ck" / "best_k_models.yaml").read_text())
    assert written == {k: pytest.approx(float(v)) for k, v in callback.best_k_models.items()}
    assert len(written) == 2


def test_the_clock_is_read_once_a_saving_step(tmp_path: Path) -> None:
    """Lightning 1.4's test_model_checkpoint_train_time_interval: one clock reading a step (with
    time.monotonic mocked to 7 s a read, two readings a step halved the interval)."""
    from datetime import timedelta
    from unittest import mock

    callback = ModelCheckpoint(dirpath=tmp_path / "ck", filename="{step}", save_top_k=-1,
                               train_time_interval=timedelta(minutes=1))  # fmt: skip
    start = 1000.0
    trainer = Trainer(default_root_dir=tmp_path, callbacks=[callback], **options(max_steps=28))
    with mock.patch("ddpkit.callbacks._checkpoint.time") as clock:
        clock.monotonic.side_effect = [start + 7 * i for i in range(1000)]
        trainer.fit(Scripted(), data(), data())  # 28 steps, 7 s each: a save every 9 steps
    # (reading the clock again to reset it moved the third save to step 28)
    assert names(tmp_path / "ck") == ["step=18.ckpt", "step=27.ckpt", "step=9.ckpt"]


def test_checkpointing_off_with_a_checkpoint_callback_is_a_contradiction() -> None:
    with pytest.raises(
        MisconfigurationError, match=r"enable_checkpointing=False, callbacks=\[ModelCheckpoint"
    ):
        Trainer(enable_checkpointing=False, callbacks=[ModelCheckpoint()])
    # the keyword the user wrote, in Lightning 1.4's words (test_configure_model_checkpoint)
    with (
        pytest.warns(ddpkit.DDPKitDeprecationWarning),
        pytest.raises(
            MisconfigurationError,
            match=r"^Trainer\(checkpoint_callback=False, .*checkpoint_callback=False but found "
            r"ModelCheckpoint in callbacks list",
        ),
    ):
        Trainer(checkpoint_callback=False, callbacks=[ModelCheckpoint()])


def test_weights_only_checkpoints_hold_no_optimizer(tmp_path: Path) -> None:
    callback = ModelCheckpoint(dirpath=tmp_path / "ck", save_weights_only=True)
    fit(tmp_path, callback, epochs=1)
    saved = load_checkpoint(callback.best_model_path)
    assert "optimizer_states" not in saved and "callbacks" not in saved
    assert saved["hyper_parameters"] == {"scores": SCORES, "lr": 0.05}
