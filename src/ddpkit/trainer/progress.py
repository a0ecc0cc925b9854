"""A progress bar on rank zero only (tqdm, when installed), for people watching a terminal.

In a terminal, each training epoch's bar stays on screen when it ends, as that epoch's summary
line; evaluation bars (sanity check, validation, test, predict) are drawn below it while they run
and leave nothing behind. Written to a file or a pipe (a log, CI), the bar draws nothing at all:
``\\r``-redrawn bars only make a log unreadable, and the epoch's metrics belong in the logs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

__all__ = ["ProgressBar"]


#: Steps between two postfix updates: formatting the metrics costs more than a tiny step.
POSTFIX_EVERY = 20

#: Descriptions of the passes whose bar is transient (``start``'s ``leave`` decides otherwise).
TRANSIENT = frozenset({"sanity check", "validate", "test", "predict"})


def _interactive(stream: TextIO) -> bool:
    """A terminal, or a notebook (ipykernel's streams are not TTYs but show a bar well)."""
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return True
    return "ipykernel" in sys.modules


class ProgressBar:
    """``start(total, desc)`` opens a bar, ``update(metrics)`` advances it by one batch,
    ``close()`` ends the innermost open bar. A bar started while a kept bar is open (validation
    in the middle of an epoch) is drawn below it, and that bar goes on after it closes."""

    def __init__(self, enabled: bool, *, file: TextIO | None = None) -> None:
        self._file = file
        self._bars: list[tuple[Any, bool]] = []  # (tqdm bar, leave), innermost last
        self._metrics: Callable[[], Mapping[str, float]] | None = None
        self._enabled = enabled and _interactive(self._stream())
        if self._enabled:
            try:
                import tqdm  # noqa: F401
            except ImportError:
                self._enabled = False

    @property
    def enabled(self) -> bool:
        """False when there is nothing to draw (not rank zero, turned off, no tqdm, output not a
        terminal): the loop then skips :meth:`update` altogether."""
        return self._enabled

    def _stream(self) -> TextIO:
        # Looked up when used, not at import: pytest and notebooks replace sys.stderr.
        return self._file if self._file is not None else sys.stderr

    def start(self, total: int | None, desc: str, *, leave: bool | None = None) -> None:
        """Open a bar of ``total`` batches (``None``: unknown). ``leave``: keep its last state on
        screen as a summary line; by default training epochs are kept and the passes named in
        :data:`TRANSIENT` are not."""
        if not self._enabled:
            return
        from tqdm import tqdm

        keep = desc not in TRANSIENT if leave is None else leave
        if keep:
            self._close_all()
        else:
            while self._bars and not self._bars[-1][1]:
                self.close()
        bar = tqdm(
            total=total,
            desc=desc,
            leave=keep,
            position=len(self._bars),
            file=self._stream(),
            dynamic_ncols=True,
        )
        self._bars.append((bar, keep))

    def update(self, metrics: Callable[[], Mapping[str, float]]) -> None:
        """One more batch. ``metrics`` is called (and its values converted to floats, which
        waits for the device) only on the steps that update the postfix, and once more when a
        kept bar closes, so that its summary line shows the epoch's last values."""
        if not self._bars:
            return
        bar, keep = self._bars[-1]
        bar.update(1)
        if keep:
            self._metrics = metrics
        if bar.n % POSTFIX_EVERY == 0:
            self._postfix(bar, metrics, refresh=False)

    def close(self) -> None:
        """End the innermost open bar (nothing when none is open)."""
        if not self._bars:
            return
        bar, keep = self._bars.pop()
        if keep and self._metrics is not None:
            self._postfix(bar, self._metrics, refresh=False)
            self._metrics = None
        bar.close()

    def _close_all(self) -> None:
        while self._bars:
            self.close()

    @staticmethod
    def _postfix(bar: Any, metrics: Callable[[], Mapping[str, float]], *, refresh: bool) -> None:
        values = metrics()
        if values:
            bar.set_postfix({k: f"{v:.4g}" for k, v in values.items()}, refresh=refresh)
