"""Lightning 1.x's non-device Trainer keywords, in Lightning 2.x's spelling.

Each keyword Lightning 2.x removed (and each 1.x *value* of a keyword it kept, such as
``accumulate_grad_batches={0: 1, 4: 2}``) is either mapped onto its 2.x spelling, with one
``DDPKitDeprecationWarning`` naming that spelling, or refused with a ``MisconfigurationError``
naming the replacement when Lightning 2.x has no way to do the same from the Trainer. A value that
asks for what Lightning 2.x does anyway (``weights_summary="top"``) is mapped to nothing, and the
warning says to drop it. The table is :data:`ddpkit.lightning.keyword_table.KEYWORDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ddpkit.errors import MisconfigurationError

__all__ = ["BadValue", "Keyword", "Refusal", "Rewrite", "quote"]


def quote(name: str, value: Any) -> str:
    """The keyword as the user wrote it: ``Trainer(weights_summary='full')``."""
    return f"Trainer({name}={value!r})"


class Refusal(Exception):
    """Raised by a handler: Lightning 2.x cannot do this from the Trainer (``why``); ``fix`` is
    the replacement. :meth:`Keyword.apply` turns it into the user's error."""

    def __init__(self, why: str, fix: str) -> None:
        super().__init__(why, fix)
        self.why, self.fix = why, fix


class BadValue(Exception):
    """Raised by a handler: not a value Lightning 1.x took; ``expected`` says which it took."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


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


#: A 1.x keyword's handler: applies the value to the rewrite and returns the Lightning 2.x
#: spelling for the warning (None: the value asks for what 2.x does anyway), or raises.
Handler = Callable[[Any, Rewrite], "str | None"]


@dataclass(frozen=True)
class Keyword:
    """One keyword of Lightning 1.x's Trainer that Lightning 2.x removed (or whose 1.x values it
    no longer takes)."""

    name: str
    removed: str
    """The Lightning version that removed it (or the value)."""
    handler: Handler
    still_a_keyword: bool = False
    """True for keywords 2.x kept, with some 1.x values removed (``max_steps=None``): the
    handler returns ``""`` for a value 2.x takes, and the value goes on unchanged."""

    def apply(self, value: Any, rewrite: Rewrite) -> None:
        rewrite.current = f"{self.name}={value!r}"
        try:
            spelling = self.handler(value, rewrite)
        except Refusal as refusal:
            raise MisconfigurationError(
                f"{quote(self.name, value)}: removed in Lightning {self.removed}, and "
                f"{refusal.why}. Fix: {refusal.fix}."
            ) from None
        except BadValue as bad:
            raise MisconfigurationError(
                f"{quote(self.name, value)}: Lightning 1.x took {bad.expected}. Fix: pass one "
                f"of those, or drop it."
            ) from None
        if spelling == "":
            rewrite.kwargs[self.name] = value
            return
        what = "this value was removed" if self.still_a_keyword else "removed"
        head = f"{quote(self.name, value)}: {what} in Lightning {self.removed}"
        if spelling is None:
            rewrite.messages.append(f"{head}; it asks for what Lightning 2.x does. Fix: drop it.")
        else:
            rewrite.messages.append(
                f"{head}; ddpkit runs it as its Lightning 2.x spelling, {spelling}."
            )
