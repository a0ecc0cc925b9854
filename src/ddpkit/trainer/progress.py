"""A progress bar on rank zero only (tqdm, when installed)."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["ProgressBar"]


class ProgressBar:
    def __init__(self, enabled: bool) -> None:
        self._bar: Any = None
        self._enabled = enabled
        if enabled:
            try:
                import tqdm  # noqa: F401
            except ImportError:
                self._enabled = False

    def start(self, total: int | None, desc: str) -> None:
        if not self._enabled:
            return
        from tqdm import tqdm

        self.close()
        self._bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr, dynamic_ncols=True)

    def update(self, metrics: dict[str, float]) -> None:
        if self._bar is None:
            return
        self._bar.update(1)
        # Formatting the postfix costs more than a tiny step: only when the bar redraws.
        if metrics and self._bar.n % 20 == 0:
            self._bar.set_postfix({k: f"{v:.4g}" for k, v in metrics.items()}, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
