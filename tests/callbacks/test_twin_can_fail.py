"""The twin comparison can fail: each kind of effect it compares, broken on purpose on one side,
is noticed — the predictions, a checkpoint's contents, a refusal's type, call and message, an
unexpected refusal, the stages that started — and so are the grid's own mistakes (an unknown
call, a stale xfail predicate, a known difference without its case, a covering sample that
misses a pair)."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import test_same_as_lightning
import twin_known
from hypothesis import given, settings
from hypothesis import strategies as st
from lightning_twin import run
from twin_case import Case, params
from twin_compare import compare, compare_refusals
from twin_grid import covering


def _joined(lightning: Any, ddpkit: Any, **kwargs: Any) -> str:
    return "\n".join(compare(lightning, ddpkit, **kwargs))


def test_other_predictions_are_noticed(tmp_path: Path) -> None:
    a = run("lightning", tmp_path, ["fit", "predict"], max_epochs=1)
    b = run("ddpkit", tmp_path, ["fit", "predict"], max_epochs=1, loader={"n": 18})
    assert "predictions:" in _joined(a, b)
    same = run("ddpkit", tmp_path / "same", ["fit", "predict"], max_epochs=1)
    assert same.predictions and same.predictions == a.predictions  # predict ran, and compares
    broken = copy.deepcopy(same)
    broken.predictions[0][0][0][0] += 0.01
    assert "predictions:" in _joined(a, broken)


def test_other_checkpoint_contents_are_noticed(tmp_path: Path) -> None:
    callbacks = [("ModelCheckpoint", {"save_top_k": -1})]
    a = run("lightning", tmp_path, ["fit"], max_epochs=2, callbacks=callbacks,
            module={"scheduler": {"interval": "step"}})  # fmt: skip
    b = run("ddpkit", tmp_path, ["fit"], max_epochs=2, callbacks=callbacks,
            module={"scheduler": {"interval": "epoch"}})  # fmt: skip
    assert a.checkpoint and set(a.checkpoint) == set(b.checkpoint)  # the same files ...
    differ = _joined(a, b)
    assert "checkpoint:" in differ and "lr_schedulers" in differ  # ... holding other states
    for key in ("state_dict", "optimizer_states", "position", "callbacks", "keys"):
        broken = copy.deepcopy(b)
        name = next(iter(broken.checkpoint))
        broken.checkpoint[name][key] = "broken"
        assert key in "\n".join(compare(b, broken)), key


def test_a_refusal_is_compared_by_call_type_and_message(tmp_path: Path) -> None:
    lightning = run("lightning", tmp_path, ["fit"], max_epochs=1, val_check_interval=50)
    ddpkit = run("ddpkit", tmp_path, ["fit"], max_epochs=1, val_check_interval=50)
    assert not compare_refusals(lightning.error, ddpkit.error, "val_check_interval")
    assert "unexpected refusal by Lightning" in "\n".join(
        compare_refusals(lightning.error, ddpkit.error, None)
    )
    lacks = compare_refusals(lightning.error, ddpkit.error, "must be less than or equal")
    assert any("ddpkit's message lacks" in m for m in lacks)
    other_type = {**ddpkit.error, "mro": ["builtins.RuntimeError", "builtins.Exception"]}
    assert any(
        "not a builtins.ValueError" in m
        for m in compare_refusals(lightning.error, other_type, "val_check_interval")
    )
    other_call = {**ddpkit.error, "call": "Trainer"}
    assert any(
        "another call" in m
        for m in compare_refusals(lightning.error, other_call, "val_check_interval")
    )
    unknown = {**lightning.error, "mro": ["some.Error", "builtins.BaseException"]}
    assert any(
        "no REFUSALS row" in m
        for m in compare_refusals(unknown, ddpkit.error, "val_check_interval")
    )
    ran = run("ddpkit", tmp_path / "ran", ["fit"], max_epochs=1)
    assert "ddpkit did not refuse" in _joined(lightning, ran, refused="val_check_interval")


def test_a_stage_that_did_not_start_is_noticed(tmp_path: Path) -> None:
    a = run("lightning", tmp_path, ["fit", "validate"], max_epochs=1, limit_val_batches=0)
    b = run("ddpkit", tmp_path, ["fit", "validate"], max_epochs=1, limit_val_batches=0)
    differ = _joined(a, b)
    assert "Lightning: validate started nothing, not validate" in differ
    assert "validate started nothing" not in _joined(a, b, skips=("validate",)).replace(
        "Lightning", ""
    )
    good = run("lightning", tmp_path / "good", ["fit", "test", "predict"], max_epochs=1)
    assert [s for _, s in good.stages] == [["fit"], ["test"], ["predict"]]
    broken = copy.deepcopy(good)
    broken.stages[2] = ("predict", [])
    assert "ddpkit: predict started nothing" in _joined(good, broken)


def test_a_known_difference_is_compared_in_its_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An APART entry leaves one difference out of the other cases, never out of its own."""
    drop = twin_known._seen(("setup",), ("training",))
    monkeypatch.setitem(twin_known.APART, "the flag at setup", drop)
    a = run("ddpkit", tmp_path, ["fit"], max_epochs=1)
    broken = copy.deepcopy(a)
    setup = next(values for hook, _, values in broken.seen if hook == "setup")
    setup["training"] = not setup["training"]
    assert "setup: training" not in _joined(a, broken)
    assert "setup: training" in _joined(a, broken, known=("the flag at setup",))


def test_every_known_difference_has_its_case() -> None:
    assert set(test_same_as_lightning.KNOWN) == set(twin_known.APART)


def test_an_unknown_call_is_a_mistake_not_a_refusal(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="validate_verbos"):
        run("ddpkit", tmp_path, ["fit", "validate_verbos"], max_epochs=1)


def test_a_stale_xfail_predicate_fails_the_collection() -> None:
    case = Case({"max_epochs": 1})
    with pytest.raises(AssertionError, match="no case meets"):
        params([("a", {"x": 1}, case)], [(lambda row: row["x"] == 2, "never")])
    (marked,) = params([("a", {"x": 1}, case)], [(lambda row: row["x"] == 1, "always")])
    assert marked.marks[0].kwargs == {"strict": True, "reason": "always"}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=6), st.integers(0, 3))
def test_the_covering_sample_holds_every_pair(sizes: list[int], seed: int) -> None:
    axes = {f"a{i}": list(range(n)) for i, n in enumerate(sizes)}
    rows = covering(axes, strength=2, seed=seed)
    for a, b in itertools.combinations(axes, 2):
        for x, y in itertools.product(axes[a], axes[b]):
            assert any(r[a] == x and r[b] == y for r in rows), (a, x, b, y)
    assert rows == covering(axes, strength=2, seed=seed)  # the same sample each time
