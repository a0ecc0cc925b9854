"""Save a checkpoint with ddpkit's ``atomic_save`` and stall in the middle, for a test to
SIGKILL this process there.

    python stalled_save.py TARGET MARKER pickling|rename

``pickling``: the object stalls while ``torch.save`` serializes it (the temporary file is open,
nothing renamed). ``rename``: every byte is in the temporary file and the process stalls in the
``fsync`` before the rename (this harness wraps ``os.fsync`` to stall; ddpkit's code is as
shipped). Either way MARKER appears when the stall begins.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from ddpkit.trainer._checkpoint import atomic_save


def stall(marker: Path) -> None:
    marker.touch()
    time.sleep(600)  # the test kills this process long before


class StallWhilePickled:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        stall(Path(self.marker))
        return (StallWhilePickled, (self.marker,))


def main() -> None:
    target, marker, where = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    checkpoint: dict[str, Any] = {
        "state_dict": {"weight": torch.full((512, 512), 2.0)},  # 1 MiB: a real write
        "global_step": 2,
    }
    if where == "pickling":
        checkpoint["stall"] = StallWhilePickled(str(marker))
    else:
        real_fsync = os.fsync

        def fsync_then_stall(fd: int) -> None:
            real_fsync(fd)
            stall(marker)

        os.fsync = fsync_then_stall
    atomic_save(checkpoint, target)


if __name__ == "__main__":
    main()
