"""A progress bar on rank zero only (tqdm, when installed)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ProgressBar"]


#: Steps between two postfix updates: formatting the metrics costs more than a tiny step.
POSTFIX_EVERY = 20


class ProgressBar:
    def __init__(self, enabled: bool) -> None:
        self._bar: Any = None
        self._enabled = enabled
        if enabled:
            try:
                import tqdm  # noqa: F401
            except ImportError:
                self._enabled = False

    @property
    def enabled(self) -> bool:
        """False when there is nothing to draw (not rank zero, turned off, no tqdm): the loop
        then skips :meth:`update` altogether."""
        return self._enabled

    def start(self, total: int | None, desc: str) -> None:
        if not self._enabled:
            return
        from tqdm import tqdm

        self.close()
        self._bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True)

    def update(self, metrics: Callable[[], Mapping[str, float]]) -> None:
        """One more batch. ``metrics`` is called (and its values converted to floats, which
        waits for the device) only on the steps that update the postfix."""
        if self._bar is None:
            return
        self._bar.update(1)
        if self._bar.n % POSTFIX_EVERY == 0:
            values = metrics()
            if values:
                self._bar.set_postfix({k: f"{v:.4g}" for k, v in values.items()}, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
