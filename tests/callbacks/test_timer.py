"""``Timer`` and ``Trainer(max_time=...)`` as Lightning 2.x's (its ``callbacks/timer.py`` and
``_configure_timer_callback``): zero and negative durations, checked at ``on_fit_start``; a
Timer of the user's beside ``max_time``; the stages it times. test_the_same_timer_readings_as_lightning
and tests/callbacks/test_same_as_lightning.py run such fits through Lightning itself."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
from callback_models import BATCHES, Scripted, data, options

from ddpkit import Trainer
from ddpkit.callbacks import ModelCheckpoint, Timer

STOPPED = "Time limit reached. Elapsed time is 0:00:00. Signaling Trainer to stop."
IGNORED = "Ignoring `Trainer(max_time=...)`, callbacks list already contains a Timer."

# Lightning 2.x takes each (its Timer parses none of them as an error): the time is already up.
ZERO_OR_LESS = [
    (timedelta(0), timedelta(0)),
    ("00:00:00:00", timedelta(0)),
    ({"seconds": 0}, timedelta(0)),
    ({"hours": 0, "minutes": 0}, timedelta(0)),
    (timedelta(seconds=-5), timedelta(seconds=-5)),
    ({"hours": -1}, timedelta(hours=-1)),
]


@pytest.mark.parametrize(("duration", "parsed"), ZERO_OR_LESS)
def test_a_zero_or_negative_duration_is_taken(duration: Any, parsed: timedelta) -> None:
    assert Timer(duration=duration).time_remaining() == parsed.total_seconds()
    trainer = Trainer(max_time=duration, logger=False)
    assert trainer.max_time == parsed
    [timer] = [cb for cb in trainer.callbacks if isinstance(cb, Timer)]
    assert timer.time_remaining() == parsed.total_seconds()


@pytest.mark.parametrize("interval", ["step", "epoch"])
def test_a_zero_duration_trains_no_step(
    tmp_path: Path, interval: str, caplog: pytest.LogCaptureFixture
) -> None:
    timer = Timer(duration=timedelta(0), interval=interval)
    trainer = Trainer(default_root_dir=tmp_path, callbacks=[timer], **options(max_epochs=3))
    with caplog.at_level(logging.INFO):
        trainer.fit(Scripted(), data())
    # Lightning 2.x's Timer checks at on_fit_start (1.4's first checked after a step)
    assert (trainer.global_step, trainer.current_epoch) == (0, 0)
    assert STOPPED in caplog.text


@pytest.mark.parametrize("max_time", ["00:00:00:00", {"minutes": -1}])
def test_max_time_of_zero_or_less_trains_no_step(tmp_path: Path, max_time: Any) -> None:
    trainer = Trainer(default_root_dir=tmp_path, max_time=max_time, **options())
    trainer.fit(Scripted(), data())
    assert (trainer.global_step, trainer.current_epoch) == (0, 0)


def test_min_epochs_outlast_a_zero_duration(tmp_path: Path) -> None:
    timer = Timer(duration=timedelta(0))
    trainer = Trainer(
        default_root_dir=tmp_path, callbacks=[timer], **options(min_epochs=2, max_epochs=5)
    )
    trainer.fit(Scripted(), data())
    assert (trainer.global_step, trainer.current_epoch) == (2 * BATCHES, 2)


def test_a_fit_resumed_with_its_time_used_up_trains_no_step(tmp_path: Path) -> None:
    # The time a checkpoint's Timer had spent counts at on_fit_start (Lightning 2.x's check
    # after the state is restored), so the resumed fit stops before its first step.
    first = Trainer(
        default_root_dir=tmp_path,
        callbacks=[Timer(duration={"hours": 1}), ModelCheckpoint(dirpath=tmp_path)],
        **options(max_epochs=1),
    )
    first.fit(Scripted(), data())
    path = tmp_path / "used_up.ckpt"
    first.save_checkpoint(path)
    checkpoint = torch.load(path, weights_only=False)
    checkpoint["callbacks"]["Timer"]["time_elapsed"]["train"] = 7200.0  # two hours spent
    torch.save(checkpoint, path)
    timer = Timer(duration={"hours": 1})
    resumed = Trainer(default_root_dir=tmp_path, callbacks=[timer], **options(max_epochs=3))
    resumed.fit(Scripted(), data(), ckpt_path=path)
    assert resumed.global_step == first.global_step == BATCHES
    assert timer.time_elapsed() == 7200.0


def test_max_time_beside_a_timer_keeps_the_users(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    own = Timer(duration=timedelta(0), interval="epoch")
    with caplog.at_level(logging.INFO, logger="ddpkit"):
        trainer = Trainer(
            default_root_dir=tmp_path, max_time={"hours": 1}, callbacks=[own], **options()
        )
    assert [cb for cb in trainer.callbacks if isinstance(cb, Timer)] == [own]
    assert caplog.messages.count(IGNORED) == 1  # Lightning's line, when the Trainer is built
    trainer.fit(Scripted(), data())
    assert trainer.global_step == 0  # the user's duration counts, not max_time's hour


def _fitted_max_epochs(**kwargs: Any) -> tuple[int | None, int | None]:
    """``trainer.max_epochs`` before and after a fit that a spent Timer ends at its start."""
    spent = Timer(duration=timedelta(0))
    trainer = Trainer(**{**options(), "callbacks": [spent], **kwargs})
    before = trainer.max_epochs
    trainer.fit(Scripted(), data())
    return before, trainer.max_epochs


def test_a_timer_among_the_callbacks_lifts_the_epoch_limit(tmp_path: Path) -> None:
    # Lightning's _parse_loop_limits, at the fit: max_epochs=None means -1 (no limit) with a
    # Timer too; None until then
    assert _fitted_max_epochs(default_root_dir=tmp_path) == (None, -1)
    assert _fitted_max_epochs(default_root_dir=tmp_path, max_epochs=3) == (3, 3)
    plain = Trainer(**{**options(), "default_root_dir": tmp_path, "max_steps": 1})
    assert plain.max_epochs is None
    plain.fit(Scripted(), data())
    assert plain.max_epochs == -1


def test_max_time_alone_adds_one_timer_quietly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ddpkit"):
        trainer = Trainer(max_time={"seconds": 1337}, logger=False)
    [timer] = [cb for cb in trainer.callbacks if isinstance(cb, Timer)]
    assert timer.time_remaining() == 1337
    assert IGNORED not in caplog.messages


STAGES = ("train", "sanity_check", "validate", "test", "predict")


def test_after_fit_the_times_stand_still(tmp_path: Path) -> None:
    timer = Timer()
    trainer = Trainer(
        default_root_dir=tmp_path,
        callbacks=[timer],
        **options(max_epochs=1, num_sanity_val_steps=2),
    )
    trainer.fit(Scripted(), data(), data())
    # Lightning's end times at on_train_end / on_validation_end: two reads give one value
    assert timer.time_elapsed() == timer.time_elapsed("train") > 0
    assert timer.time_elapsed("validate") == timer.time_elapsed("validate") > 0
    assert timer.time_elapsed("test") == 0 == timer.time_elapsed("predict")
    started, ended = timer.start_time("train"), timer.end_time("train")
    assert started is not None and ended is not None
    assert timer.time_elapsed() == ended - started
    assert timer.start_time("test") is None and timer.end_time("test") is None
    trainer.test(Scripted(), data())
    assert timer.time_elapsed("test") == timer.time_elapsed("test") > 0
    assert list(timer.state_dict()["time_elapsed"]) == list(STAGES)  # Lightning's keys


def test_a_stage_run_again_counts_from_its_new_start(tmp_path: Path) -> None:
    # Lightning's keeps the earlier run's end until the new one, so its time runs negative
    # meanwhile (docs/flags.md, Differences); ddpkit's counts from the new start.
    timer = Timer()
    seen: list[float] = []

    class Probe(Scripted):
        def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
            seen.append(timer.time_elapsed("validate"))
            assert timer.end_time("validate") is None  # running

    trainer = Trainer(default_root_dir=tmp_path, callbacks=[timer], **options(max_epochs=1))
    trainer.validate(Probe(), data(), verbose=False)
    first = timer.time_elapsed("validate")
    trainer.validate(Probe(), data(), verbose=False)
    assert min(seen) >= 0 and timer.time_elapsed("validate") > 0 and first > 0


def test_a_stage_is_lightnings_running_stage(tmp_path: Path) -> None:
    timer = Timer(duration={"seconds": 10})
    assert [timer.time_elapsed(stage) for stage in STAGES] == [0.0] * 5
    assert timer.time_remaining("validate") == 10

    class Stage:  # Lightning's RunningStage member: a str enum, read by its value
        value = "test"

    assert timer.start_time(Stage()) is None
    with pytest.raises(
        ValueError, match=r"^Timer\.time_elapsed\(stage='fit'\): not a stage.*Fix: "
    ):
        timer.time_elapsed("fit")
    with pytest.raises(ValueError, match=r"^Timer\.end_time\(stage=None\)"):
        timer.end_time(None)  # type: ignore[arg-type]


def _readings(timer: Any) -> dict[str, Any]:
    try:
        timer.time_elapsed("fit")
        refused = None
    except ValueError:  # Lightning's RunningStage refusal is a ValueError, ddpkit's too
        refused = "ValueError"
    return {
        "started": [timer.start_time(s) is not None for s in STAGES],
        "ended": [timer.end_time(s) is not None for s in STAGES],
        "timed": [timer.time_elapsed(s) > 0 for s in STAGES],
        "still": timer.time_elapsed() == timer.time_elapsed(),
        "state": list(timer.state_dict()["time_elapsed"]),
        "remaining": timer.time_remaining() is not None,
        "refused": refused,
    }


@pytest.mark.parametrize("calls", [("fit",), ("fit", "test"), ("validate",)])
def test_the_same_timer_readings_as_lightning(tmp_path: Path, calls: tuple[str, ...]) -> None:
    pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")
    from lightning_twin import run

    found = {}
    for kind in ("lightning", "ddpkit"):
        timers: list[Any] = []

        def callbacks(lib: Any, timers: list[Any] = timers) -> list[Any]:
            timers.append(lib.callbacks.Timer(duration={"hours": 1}))
            return timers

        run(kind, tmp_path, list(calls), callbacks=callbacks, max_steps=5, limit_val_batches=2)
        found[kind] = _readings(timers[0])
    assert found["ddpkit"] == found["lightning"]
