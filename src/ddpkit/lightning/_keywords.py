"""Lightning 1.x's non-device Trainer keywords, in Lightning 2.x's spelling.

Each keyword Lightning 2.x removed (and each 1.x *value* of a keyword it kept, such as
``accumulate_grad_batches={0: 1, 4: 2}``) is either mapped onto its 2.x spelling, with one
``DDPKitDeprecationWarning`` naming that spelling, or refused with a ``MisconfigurationError``
naming the replacement when Lightning 2.x has no way to do the same from the Trainer. A value that
asks for what Lightning 2.x does anyway (``weights_summary="top"``) is mapped to nothing, and the
warning says to drop it. The table is :data:`ddpkit.lightning._keyword_table.KEYWORDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpkit.errors import MisconfigurationError
from ddpkit.trainer.legacy_table import Row

__all__ = ["Keyword", "NOTHING", "Refusal", "Rewrite", "callback_list", "quote"]


def quote(name: str, value: Any) -> str:
    """The keyword as the user wrote it: ``Trainer(weights_summary='full')``."""
    return f"Trainer({name}={value!r})"


def callback_list(given: Any) -> list[Any]:
    """``callbacks=`` as Lightning takes it (None, one callback or a list), as a new list."""
    return [] if given is None else list(given) if isinstance(given, list) else [given]


class Refusal(Exception):
    """Raised by a handler: Lightning 2.x cannot do this from the Trainer (``why``); ``fix`` is
    the replacement. :meth:`Keyword.apply` turns it into the user's error."""

    def __init__(self, why: str, fix: str) -> None:
        super().__init__(why, fix)
        self.why, self.fix = why, fix


@dataclass
class Rewrite:
    """The Lightning 2.x Trainer a call means, built up keyword by keyword."""

    kwargs: dict[str, Any]
    """Lightning 2.x keywords: the user's own, plus what 1.x keywords became."""
    given: Mapping[str, Any]
    """The call as the user wrote it (for conflicts between a 1.x keyword and its 2.x name)."""
    callbacks: list[Any] = field(default_factory=list)
    """Callbacks that 1.x keywords became, added after the user's own."""
    messages: list[str] = field(default_factory=list)
    """One deprecation message per 1.x keyword."""
    resume_from_checkpoint: Any = None
    """``fit(ckpt_path=...)`` when ``fit`` is called without one."""
    prepare_data_per_node: bool | None = None
    """Set on the module and data module of every stage."""
    flush_logs_every_n_steps: int | None = None
    """Set on every CSVLogger of the Trainer."""
    tune: dict[str, Any] = field(default_factory=dict)
    """What ``trainer.tune()`` runs: ``{"lr_find": attr_name, "scale_batch_size": mode}``."""
    progress_bar: dict[str, Any] = field(default_factory=dict)
    """``TQDMProgressBar`` arguments (``refresh_rate``, ``process_position``)."""
    automatic_optimization: bool | None = None
    """Set on the module of every stage (1.1–1.2's ``Trainer(automatic_optimization=False)``)."""
    current: str = ""
    """The 1.x keyword being applied, as written (``weights_summary=None``)."""

    def set(self, name: str, value: Any) -> None:
        """Set a 2.x keyword that the current 1.x one became, unless the user set it otherwise."""
        source = self.current
        if self.given.get(name) is not None and self.given[name] != value:
            raise MisconfigurationError(
                f"Trainer({source}, {name}={self.given[name]!r}): {source} means {name}="
                f"{value!r}, which contradicts {name}={self.given[name]!r}. Fix: pass only "
                f"{name}={self.given[name]!r}."
            )
        self.kwargs[name] = value

    def callback(self, callback: Any) -> None:
        self.callbacks.append(callback)

    def users(self, kind: type) -> Any:
        """The user's own callback of that kind in ``callbacks=`` (None: there is none)."""
        return next(
            (c for c in callback_list(self.given.get("callbacks")) if isinstance(c, kind)), None
        )


#: A 1.x keyword's handler: applies a value that asks for something to the rewrite. It returns
#: None (the row's Lightning 2.x spelling names what it became), its own spelling, or
#: :data:`NOTHING` (this value asks for nothing after all); or it raises :class:`Refusal`.
Handler = Callable[[Any, Rewrite], "str | None"]
#: A handler's answer: the value asks for what Lightning 2.x does anyway.
NOTHING = "\0nothing"


@dataclass(frozen=True)
class Keyword:
    """What ``ddpkit.lightning.Trainer`` does with one row of the shared table
    (:mod:`ddpkit.trainer.legacy_table`)."""

    row: Row
    handler: Handler | None = None
    """None: no value of it asks for something Lightning 2.x can do (a row with ``gone``)."""

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def removed(self) -> str:
        return self.row.removed

    @property
    def still_a_keyword(self) -> bool:
        return self.row.kept

    def apply(self, value: Any, rewrite: Rewrite) -> None:
        row = self.row
        nothing = row.asks_for_nothing(value)
        if nothing is True:
            return  # the last 1.x default: what Trainer(...) without it does
        if row.kept and nothing is None and not row.check(value):
            if row.takes is not None and not row.takes[1](value):
                raise MisconfigurationError(
                    f"{quote(row.name, value)}: Lightning 2.x takes {row.takes[0]}, and "
                    f"Lightning 1.x took {row.accepts}. Fix: pass one of those, or drop it."
                )
            rewrite.kwargs[row.name] = value  # a value Lightning 2.x takes
            return
        if nothing is None and not row.check(value):
            raise MisconfigurationError(
                f"{quote(row.name, value)}: Lightning 1.x took {row.accepts}. Fix: pass one of "
                f"those, or drop it."
            )
        rewrite.current = f"{row.name}={value!r}"
        spelling = self._spelling(value, rewrite, asks=nothing is None)
        what = "this value was removed" if row.kept else "removed"
        head = f"{quote(row.name, value)}: {what} in Lightning {row.removed}"
        if spelling == NOTHING:
            rewrite.messages.append(f"{head}; it asks for what Lightning 2.x does. Fix: drop it.")
        else:
            rewrite.messages.append(
                f"{head}; ddpkit runs it as its Lightning 2.x spelling, {spelling}."
            )

    def _spelling(self, value: Any, rewrite: Rewrite, *, asks: bool) -> str:
        row = self.row
        if not asks:
            return NOTHING  # nothing to pass on: Trainer(...) without it does the same
        if row.gone:
            raise MisconfigurationError(
                f"{quote(row.name, value)}: removed in Lightning {row.removed}, and {row.gone}. "
                f"Fix: {row.spelling(value)}."
            )
        try:
            answer = self.handler(value, rewrite) if self.handler is not None else NOTHING
        except Refusal as refusal:
            raise MisconfigurationError(
                f"{quote(row.name, value)}: removed in Lightning {row.removed}, and "
                f"{refusal.why}. Fix: {refusal.fix}."
            ) from None
        return row.spelling(value) if answer is None else answer
