"""What the user sees when a job ends badly: one line per rank after an interrupt."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from ddpkit.errors import RankFailure

__all__ = ["report_interrupt"]


def report_interrupt(signum: int, what: str, fates: Sequence[RankFailure]) -> None:
    """After SIGINT/SIGTERM ended every rank: one line per rank on stderr."""
    name = signal.Signals(signum).name
    lines = [f"ddpkit: {name}: every rank of {what} ended:"]
    lines += [f"  {fate.line()}" for fate in fates]
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()
