"""Checkpoints: written atomically on global rank zero, loaded with ``weights_only=True``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

__all__ = ["atomic_save", "load_checkpoint"]


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save`` to a temporary file in the same folder, fsync, rename.

    A crash at any point leaves either the previous file or the new one, never a truncated one
    (rename within one file system is atomic). The temporary file is removed when the save
    raises; a process killed outright (SIGKILL, power loss) can leave it behind as a hidden
    sibling ``.<name>.<random>.tmp``, which no ``*.ckpt`` pattern matches and which is safe to
    delete.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return target
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return target


def load_checkpoint(path: str | os.PathLike[str], *, weights_only: bool = True) -> dict[str, Any]:
    """Load on CPU. ``weights_only=True`` refuses to run code hidden in the file; pass False only
    for checkpoints you trust that hold arbitrary objects."""
    data = torch.load(Path(path), map_location="cpu", weights_only=weights_only)
    if not isinstance(data, dict) or "state_dict" not in data:
        from ddpkit.errors import MisconfigurationError

        raise MisconfigurationError(
            f"load_checkpoint({str(path)!r}): not a ddpkit checkpoint (no 'state_dict' key)."
        )
    return data
