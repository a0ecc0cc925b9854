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

Effects = dict[str, Any]
Drop = Callable[[Effects, Effects], None]

_METRICS = ("callback_metrics", "logged_metrics", "progress_bar_metrics")


def _seen(hooks: tuple[str, ...], names: tuple[str, ...]) -> Drop:
    """Leaves ``names`` out of what the watching callback read at ``hooks``."""

    def drop(lightning: Effects, ddpkit: Effects) -> None:
        for hook, _, values in (*lightning["seen"], *ddpkit["seen"]):
            if hook in hooks:
                for name in names:
                    values.pop(name, None)

    return drop


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
    # an evaluation's step values are in Lightning's logged_metrics (and progress bar
    # metrics) at its batch hooks
    "evaluation step values in logged_metrics": _seen(
        tuple(f"on_{s}_batch_{e}" for s in ("validation", "test") for e in ("start", "end")),
        ("logged_metrics", "progress_bar_metrics"),
    ),
}
