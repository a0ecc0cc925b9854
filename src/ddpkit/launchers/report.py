"""What the user sees when a job ends badly: one line per rank after an interrupt, and the
phrases that describe a rank's end."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from ddpkit.errors import RankFailure

__all__ = ["first_line", "report_interrupt"]


def report_interrupt(signum: int, what: str, fates: Sequence[RankFailure]) -> None:
    """After SIGINT/SIGTERM ended every rank: one line per rank on stderr."""
    name = signal.Signals(signum).name
    lines = [f"ddpkit: {name}: every rank of {what} ended:"]
    lines += [f"  {fate.line()}" for fate in fates]
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


def first_line(exc: BaseException) -> str:
    """'RuntimeError: boom': an exception's type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
