"""Differences from Lightning already known (issue 33) that would show in most cases of the
twin comparison, each set apart so that it does not hide the other differences of those cases.

Every entry leaves exactly one difference out of both runs' effects; the case named ``known:
<entry>`` in tests/callbacks/test_same_as_lightning.py compares it all the same, as an
xfail(strict=True). When ddpkit is fixed, that case passes and fails as strict: remove its
entry here and its xfail there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twin_read import CALLBACK_HOOKS

Effects = dict[str, Any]
Drop = Callable[[Effects, Effects], None]

_METRICS = ("callback_metrics", "logged_metrics", "progress_bar_metrics")


def _seen(
    hooks: tuple[str, ...], names: tuple[str, ...], where: Callable[[Any, Any], bool] | None = None
) -> Drop:
    """Leaves ``names`` out of what the watching callback read at ``hooks`` (only where the two
    values meet ``where``, when given)."""

    def drop(lightning: Effects, ddpkit: Effects) -> None:
        pairs = (
            zip(lightning["seen"], ddpkit["seen"])
            if where
            else [(e, None) for e in (*lightning["seen"], *ddpkit["seen"])]
        )
        for a, b in pairs:
            if a[0] not in hooks:
                continue
            for name in names:
                if where is None:
                    a[2].pop(name, None)
                elif b is not None and where(a[2].get(name), b[2].get(name)):
                    a[2].pop(name, None), b[2].pop(name, None)

    return drop


def _empty_or_zero(a: Any, b: Any) -> bool:
    return a == [] and b == [0]


def _empty_counts(lightning: Effects, ddpkit: Effects) -> None:
    names = ("num_val_batches", "num_sanity_val_batches")
    _seen(CALLBACK_HOOKS, names, _empty_or_zero)(lightning, ddpkit)
    for name in names:
        if _empty_or_zero(lightning["attributes"].get(name), ddpkit["attributes"].get(name)):
            del lightning["attributes"][name], ddpkit["attributes"][name]


def _num_val_batches(lightning: Effects, ddpkit: Effects) -> None:
    """After a validate, every later stage's num_val_batches."""
    for effects in (lightning, ddpkit):
        calls = [call for call, _ in effects["stages"]]
        first = next((i for i, c in enumerate(calls) if c.startswith("validate")), None)
        if first is not None and first < len(calls) - 1:
            _seen(CALLBACK_HOOKS, ("num_val_batches",))(effects, effects)
            effects["attributes"].pop("num_val_batches", None)


def _sanity_counts(lightning: Effects, ddpkit: Effects) -> None:
    """num_sanity_val_batches at on_sanity_check_start; num_test_batches / num_predict_batches
    while the sanity check runs."""
    for effects in (lightning, ddpkit):
        for hook, _, values in effects["seen"]:
            if hook == "on_sanity_check_start":
                values.pop("num_sanity_val_batches", None)
            if values.get("sanity_checking"):
                values.pop("num_test_batches", None), values.pop("num_predict_batches", None)


def _sanity_metrics(lightning: Effects, ddpkit: Effects) -> None:
    """The sanity check's values, in Lightning's logged / progress bar metrics until it ends
    (and after it, where it ended in a refusal)."""
    hooks = ("on_validation_epoch_end", "on_validation_end", "on_sanity_check_end", "on_exception")
    _seen(hooks, ("logged_metrics", "progress_bar_metrics"))(lightning, ddpkit)
    if (
        lightning["error"]
        and lightning["seen"]
        and any(s[2].get("sanity_checking") for s in lightning["seen"][-2:])
    ):
        for effects in (lightning, ddpkit):
            effects["logged_metrics"], effects["progress_bar_metrics"] = {}, {}


#: name -> what it leaves out of both runs
APART: dict[str, Drop] = {
    # at `setup`, Lightning still shows the previous stage's metrics and has no loaders yet
    "the previous stage at setup": _seen(("setup",), (*_METRICS, "num_val_batches")),
    # Lightning shows the sanity check's epoch values in logged / progress bar metrics until
    # the check ends; ddpkit shows none
    "sanity check metrics": _sanity_metrics,
    # outside a validate, Lightning's num_val_batches is the fit's; ddpkit keeps a validate's
    "num_val_batches after validate": _num_val_batches,
    # Lightning shows the previous count at on_sanity_check_start, and clips every evaluation
    # loop's count (num_test_batches too) to num_sanity_val_steps during the check
    "batch counts in the sanity check": _sanity_counts,
    # an evaluation's step values are in Lightning's logged_metrics (and progress bar
    # metrics) at its batch hooks
    "evaluation step values in logged_metrics": _seen(
        tuple(f"on_{s}_batch_{e}" for s in ("validation", "test") for e in ("start", "end")),
        ("logged_metrics", "progress_bar_metrics"),
    ),
    # a loop that does not run (no sanity check, no validation batches) counts [] batches in
    # Lightning, [0] in ddpkit
    "[] batches of a loop that does not run": _empty_counts,
}
