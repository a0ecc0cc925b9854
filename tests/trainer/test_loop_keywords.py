"""Every loop keyword of ``Trainer(...)`` is checked when the Trainer is built: a bad value is a
MisconfigurationError quoting the call, stating the problem and ending with a fix; a typo gets a
did-you-mean; every keyword of Lightning 2.x's Trainer is honoured or refused naming why; the 1.x
ones are mapped (with a warning naming the 2.x spelling) or refused naming the replacement."""

from __future__ import annotations

import inspect
import math
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddpkit import DDPKitDeprecationWarning, MisconfigurationError, Trainer
from ddpkit.trainer._legacy import LEGACY_MAPPED, LEGACY_REFUSED
from ddpkit.trainer._trainer import LOOP_KEYWORDS

try:  # imported at collection: Lightning's import sets an environment variable of torch's
    import pytorch_lightning as pl
except ImportError:  # pragma: no cover - the `lightning` extra is not installed
    pl = None

DEVICE_FLAGS = {
    "accelerator",
    "strategy",
    "devices",
    "num_nodes",
    "precision",
    "plugins",
    "sync_batchnorm",
    "gpus",
    "num_processes",
}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"max_steps": None},
            r"^Trainer\(max_steps=None\): got None; pass an int ≥ -1 \(-1: no limit\)\. Fix: Trainer\(max_steps=1\)\.$",
        ),
        ({"max_epochs": -5}, r"^Trainer\(max_epochs=-5\): must be ≥ -1 \(-1: no limit\)\. Fix: "),
        ({"max_epochs": 2.5}, r"^Trainer\(max_epochs=2.5\): got float"),
        (
            {"log_every_n_steps": -1},
            r"^Trainer\(log_every_n_steps=-1\): must be ≥ 0 \(0: no step rows\)",
        ),
        (
            {"accumulate_grad_batches": "2"},
            r"^Trainer\(accumulate_grad_batches='2'\): got str; pass an int ≥ 1",
        ),
        (
            {"accumulate_grad_batches": {0: 1, 2: 0}},
            r"accumulate_grad_batches=\{0: 1, 2: 0\}\): a schedule maps epochs",
        ),
        ({"accumulate_grad_batches": {}}, r"an empty schedule"),
        ({"fast_dev_run": "x"}, r"^Trainer\(fast_dev_run='x'\): got str"),
        ({"fast_dev_run": float("inf")}, r"^Trainer\(fast_dev_run=inf\): got float"),
        ({"fast_dev_run": -1}, r"^Trainer\(fast_dev_run=-1\): must be ≥ 0"),
        (
            {"limit_val_batches": 1.5},
            r"^Trainer\(limit_val_batches=1.5\): a fraction of the batches must lie in \[0.0, 1.0\]",
        ),
        (
            {"limit_test_batches": -2},
            r"^Trainer\(limit_test_batches=-2\): a count of batches must be ≥ 0",
        ),
        ({"limit_predict_batches": "all"}, r"^Trainer\(limit_predict_batches='all'\): pass an int"),
        ({"limit_train_batches": math.nan}, r"^Trainer\(limit_train_batches=nan\)"),
        ({"overfit_batches": -1}, r"^Trainer\(overfit_batches=-1\)"),
        (
            {"val_check_interval": 0},
            r"^Trainer\(val_check_interval=0\): a count of batches must be ≥ 1",
        ),
        (
            {"val_check_interval": "01:00:00"},
            r"val_check_interval='01:00:00'\).*no time-based interval",
        ),
        ({"check_val_every_n_epoch": 0}, r"^Trainer\(check_val_every_n_epoch=0\)"),
        (
            {"check_val_every_n_epoch": None, "val_check_interval": 0.5},
            r"check_val_every_n_epoch=None, val_check_interval=0.5",
        ),
        ({"num_sanity_val_steps": -2}, r"^Trainer\(num_sanity_val_steps=-2\)"),
        ({"gradient_clip_val": -1.0}, r"^Trainer\(gradient_clip_val=-1.0\): pass a number ≥ 0"),
        ({"gradient_clip_val": "1"}, r"^Trainer\(gradient_clip_val='1'\)"),
        (
            {"gradient_clip_algorithm": "l2"},
            r"^Trainer\(gradient_clip_algorithm='l2'\): choose 'norm' or 'value'",
        ),
        ({"deterministic": "yes"}, r"^Trainer\(deterministic='yes'\): pass True, False or 'warn'"),
        ({"enable_progress_bar": 1}, r"^Trainer\(enable_progress_bar=1\): pass True or False"),
        ({"benchmark": "fast"}, r"^Trainer\(benchmark='fast'\)"),
        ({"inference_mode": None}, r"^Trainer\(inference_mode=None\)"),
        ({"default_root_dir": 5}, r"^Trainer\(default_root_dir=5\): pass a folder path"),
        ({"max_time": "1 hour"}, r"^Trainer\(max_time='1 hour'\): a string must read DD:HH:MM:SS"),
        (
            {"max_time": {"hours": "1"}},
            r"max_time=\{'hours': '1'\}\): every unit needs a finite number",
        ),
        ({"max_time": {"years": 1}}, r"unknown units \['years'\]"),
        (
            {"min_epochs": 5, "max_epochs": 2},
            r"^Trainer\(min_epochs=5, max_epochs=2\): min_epochs exceeds max_epochs\. Fix: ",
        ),
        ({"min_steps": 10, "max_steps": 3}, r"^Trainer\(min_steps=10, max_steps=3\)"),
        (
            {"reload_dataloaders_every_n_epochs": -1},
            r"^Trainer\(reload_dataloaders_every_n_epochs=-1\)",
        ),
        (
            {"callbacks": [object()]},
            r"object is not a Callback\. Fix: subclass ddpkit.callbacks.Callback",
        ),
        ({"logger": 3}, r"^Trainer\(logger=3\): int is not a logger"),
        (
            {"profiler": "simple"},
            r"^Trainer\(profiler='simple'\): ddpkit's loop has no profiler\. Fix: ",
        ),
        ({"model_registry": "my-model"}, r"^Trainer\(model_registry='my-model'\).*Fix: "),
        (
            {"barebones": True, "logger": True},
            r"^Trainer\(barebones=True, logger=True\): barebones turns logger off",
        ),
    ],
)
def test_a_bad_value_quotes_the_call_and_gives_a_fix(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(MisconfigurationError, match=message) as caught:
        Trainer(**kwargs)
    assert "Fix" in str(caught.value) or "choose" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("max_epoch", "max_epochs"),
        ("limit_val_batch", "limit_val_batches"),
        ("callback", "callbacks"),
        ("gradient_clip_value", "gradient_clip_val"),
    ],
)
def test_a_typo_gets_a_did_you_mean(name: str, suggestion: str) -> None:
    with pytest.raises(
        MisconfigurationError,
        match=rf"^Trainer\({name}=3\): no such keyword \(did you mean '{suggestion}'\?\)$",
    ):
        Trainer(**{name: 3})
    with pytest.raises(
        MisconfigurationError, match=r"no such keyword\. The keywords are: .*max_epochs"
    ):
        Trainer(completely_unrelated=1)


def test_every_lightning_2_keyword_is_honoured_or_refused() -> None:
    if pl is None:
        pytest.skip("the `lightning` extra is not installed")
    theirs = set(inspect.signature(pl.Trainer.__init__).parameters) - {"self"}
    ours = set(inspect.signature(Trainer.__init__).parameters) - {"self", "legacy"}
    assert theirs - ours == set()  # every one is a keyword of ours, with Lightning's default
    for name in theirs - DEVICE_FLAGS:
        default = inspect.signature(pl.Trainer.__init__).parameters[name].default
        assert LOOP_KEYWORDS[name] == default, name


@pytest.mark.parametrize("name", sorted(LEGACY_REFUSED))
def test_a_removed_1x_keyword_is_refused_naming_its_replacement(name: str) -> None:
    with pytest.raises(
        MisconfigurationError, match=rf"^Trainer\({name}=1\): a Lightning 1.x keyword, .*Fix: "
    ):
        Trainer(**{name: 1})


@pytest.mark.parametrize(
    ("kwargs", "modern", "check"),
    [
        (
            {"replace_sampler_ddp": False},
            r"use_distributed_sampler=False",
            lambda t: t.use_distributed_sampler is False,
        ),
        (
            {"checkpoint_callback": False},
            r"enable_checkpointing=False",
            lambda t: t.checkpoint_callback is None,
        ),
        (
            {"progress_bar_refresh_rate": 0},
            r"enable_progress_bar=False",
            lambda t: t.enable_progress_bar is False,
        ),
        (
            {"weights_summary": None},
            r"enable_model_summary=False",
            lambda t: not t.enable_model_summary,
        ),
        (
            {"weights_summary": "full"},
            r"ModelSummary\(max_depth=-1\)",
            lambda t: t.enable_model_summary,
        ),
        (
            {"resume_from_checkpoint": "x.ckpt"},
            r"trainer.fit\(model, ckpt_path='x.ckpt'\)",
            lambda t: True,
        ),
        (
            {"reload_dataloaders_every_epoch": True},
            r"reload_dataloaders_every_n_epochs=1",
            lambda t: t.reload_dataloaders_every_n_epochs == 1,
        ),
    ],
)
def test_a_1x_keyword_with_a_2x_meaning_is_mapped_with_a_warning(
    kwargs: dict[str, Any], modern: str, check: Any
) -> None:
    with pytest.warns(
        DDPKitDeprecationWarning,
        match=rf"is a Lightning 1.x keyword; ddpkit still honours it. The same, spelled today: .*{modern}",
    ):
        trainer = Trainer(**kwargs)
    assert check(trainer)


def test_a_1x_keyword_and_its_2x_spelling_together_are_refused() -> None:
    with pytest.raises(
        MisconfigurationError,
        match=r"Trainer\(checkpoint_callback=False, enable_checkpointing=True\): both say",
    ):
        Trainer(checkpoint_callback=False, enable_checkpointing=True)
    with pytest.raises(
        MisconfigurationError,
        match=r"progress_bar_refresh_rate=-1\): Invalid type provided for "
        r"progress_bar_refresh_rate: a Lightning 1.x keyword that takes an int ≥ 0\. Fix: "
        r"Trainer\(enable_progress_bar=False\)",
    ):
        Trainer(progress_bar_refresh_rate=-1)


def test_defaults_resolve_as_in_lightning() -> None:
    t = Trainer()
    # Lightning's: max_epochs and the minimums are None until given or fitted (a fit reports
    # max_epochs 1000, min_epochs 0; tests/callbacks/test_grid_stages.py compares both)
    assert (t.max_epochs, t.max_steps, t.min_epochs, t.min_steps) == (None, -1, None, None)
    assert (t.log_every_n_steps, t.num_sanity_val_steps, t.val_check_interval) == (50, 2, 1.0)
    assert (t.limit_train_batches, t.limit_val_batches, t.check_val_every_n_epoch) == (1.0, 1.0, 1)
    assert (t.enable_checkpointing, t.enable_progress_bar, t.enable_model_summary) == (
        True,
        True,
        True,
    )
    assert Trainer(max_epochs=-1).max_epochs == -1
    assert Trainer(max_time="00:01:00:00").max_time == timedelta(hours=1)
    assert Trainer(gradient_clip_algorithm="Value").gradient_clip_algorithm == "value"
    bare = Trainer(barebones=True)
    assert (
        bare.logger,
        bare.checkpoint_callback,
        bare.enable_progress_bar,
        bare.log_every_n_steps,
    ) == (None, None, False, 0)
    fast = Trainer(fast_dev_run=3)
    assert (fast.max_steps, fast.limit_val_batches, fast.fast_dev_run, fast.loggers) == (
        3,
        3,
        3,
        [],
    )
    assert Trainer(fast_dev_run=True).fast_dev_run is True


# -- a property: every combination of loop keyword values gives a Trainer or a
#    MisconfigurationError, never another exception -----------------------------------------

_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=5),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from(["", "x", "2", "norm", "value", "warn", "00:00:01:00", "max", "min"]),
    st.lists(st.integers(min_value=-1, max_value=2), max_size=2),
    st.dictionaries(
        st.integers(min_value=-1, max_value=3), st.integers(min_value=-1, max_value=3), max_size=2
    ),
    st.dictionaries(
        st.sampled_from(["hours", "minutes", "weeks", "years"]), st.integers(-2, 2), max_size=2
    ),
    st.timedeltas(min_value=timedelta(seconds=-5), max_value=timedelta(days=2)),
    st.builds(object),
)
_NAMES = sorted(
    set(LOOP_KEYWORDS) | set(LEGACY_MAPPED) | set(LEGACY_REFUSED) | {"max_epoch", "bogus"}
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(_NAMES), _ANY, max_size=4))
def test_any_loop_keywords_give_a_trainer_or_a_misconfiguration_error(
    kwargs: dict[str, Any],
) -> None:
    kwargs.pop("default_root_dir", None)  # a path would create nothing, but keep the cwd clean
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DDPKitDeprecationWarning)
            Trainer(**kwargs)
    except MisconfigurationError as error:
        text = str(error)
        assert text.startswith("Trainer(") or text.startswith(
            ("ModelCheckpoint(", "ModelSummary(")
        ), text
