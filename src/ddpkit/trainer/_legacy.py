"""Lightning 1.x keywords of ``ddpkit.Trainer(...)``: what this Trainer does with each row of the
shared table (:mod:`ddpkit._compat_1x.keywords`, which ``ddpkit.lightning.Trainer`` reads too).

A value that asks for nothing is accepted (the last 1.x default silently, any other with a warning
to drop it); a value this Trainer honours is mapped onto its 2.x keywords with a
``DDPKitDeprecationWarning`` naming Lightning 2.x's spelling; every other value is refused with
that spelling as the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ddpkit._compat_1x.keywords import ROWS, as_call
from ddpkit.errors import DDPKitDeprecationWarning
from ddpkit.trainer._keywords import bad, call
from ddpkit.utilities._rank_zero import rank_zero_warn

Mapping = Callable[[Any], "dict[str, Any] | None"]

#: 1.x keyword → its value in this Trainer's 2.x keywords (None: a value it cannot honour).
LEGACY_MAPPED: dict[str, Mapping] = {
    "replace_sampler_ddp": lambda v: {"use_distributed_sampler": v},
    "checkpoint_callback": lambda v: {"enable_checkpointing": v} if isinstance(v, bool) else None,
    "progress_bar_refresh_rate": lambda v: {"enable_progress_bar": bool(v)},
    "weights_summary": lambda v: {
        "enable_model_summary": v is not None,
        "_summary_depth": -1 if v == "full" else 1,
    },
    "resume_from_checkpoint": lambda v: {"_resume_from_checkpoint": v},
    "reload_dataloaders_every_epoch": lambda v: {"reload_dataloaders_every_n_epochs": 1},
}
#: Spellings of this Trainer that differ from Lightning 2.x's (its bar has no refresh rate).
_OWN_SPELLING: dict[str, Callable[[Any], str]] = {
    "progress_bar_refresh_rate": lambda v: f"enable_progress_bar={bool(v)}",
}

#: The other 1.x (and 0.x) keywords → why this Trainer refuses what they ask for.
LEGACY_REFUSED: dict[str, str] = {
    name: row.gone or "ddpkit's Trainer does not do it; ddpkit.lightning.Trainer does"
    for name, row in ROWS.items()
    if not row.kept and name not in LEGACY_MAPPED
}


def map_legacy(name: str, value: Any) -> tuple[dict[str, Any], Callable[[], None]]:
    """A 1.x keyword in 2.x terms and the warning that says so (to give once the rest is
    checked), or a refusal naming the replacement."""
    row = ROWS[name]
    nothing = row.asks_for_nothing(value)
    if nothing is True:
        return {}, lambda: None
    if nothing is False:
        message = (
            f"{call(name, value)} is a Lightning 1.x keyword, removed in Lightning {row.removed}, "
            f"asking for what this Trainer does anyway. Fix: drop it."
        )
        return {}, lambda: rank_zero_warn(message, DDPKitDeprecationWarning)
    spell = _OWN_SPELLING.get(name, row.spelling)
    if name in LEGACY_REFUSED:
        shown = value if row.check(value) else row.example
        raise bad(
            name,
            value,
            f"a Lightning 1.x keyword, removed in Lightning {row.removed}; {LEGACY_REFUSED[name]}. "
            f"Fix: {as_call(spell(shown))}.",
        )
    if not row.check(value):
        raise bad(
            name,
            value,
            f"Invalid type provided for {name}: a Lightning 1.x keyword that takes {row.accepts}. "
            f"Fix: {as_call(spell(row.example))}.",
        )
    mapping = LEGACY_MAPPED[name](value)
    if mapping is None:
        raise bad(
            name,
            value,
            f"a Lightning 1.x keyword, removed in Lightning {row.removed}; this Trainer takes "
            f"that value only as {as_call(spell(value))}. Fix: pass that instead.",
        )
    message = (
        f"{call(name, value)} is a Lightning 1.x keyword; ddpkit still honours it. The same, "
        f"spelled today: {as_call(spell(value))}."
    )
    return mapping, lambda: rank_zero_warn(message, DDPKitDeprecationWarning)
