"""The one atomic write: a file appears whole or not at all.

Everything ddpkit writes that someone may read while it is being written goes through
:func:`atomic_write`: a rank's error report and stage counter (read by the supervisor while the
rank runs), an isolated test's records, checkpoints, ``metrics.csv``, ``hparams.yaml`` and the
plot of a run. The data goes to a hidden sibling ``.<name>.<random>.tmp`` in the same folder,
which is then renamed over the target (a rename within one file system is atomic): a reader sees
the old file or the whole new one, never half of it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write"]

# O_NOFOLLOW: a symlink planted where the temporary file goes is an error, not a redirection.
_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _open_sibling(target: Path, mode: int) -> tuple[BinaryIO, Path]:
    """A new hidden file next to ``target`` (O_EXCL: never one that another writer holds)."""
    while True:
        partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(partial, _FLAGS, mode)
        except FileExistsError:
            continue
        return os.fdopen(fd, "wb"), partial


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | Callable[[BinaryIO], object],
    *,
    private: bool = False,
    durable: bool = False,
) -> Path:
    """Write ``data`` (bytes, or a function that writes into the open file) to ``path``.

    ``private``: the file is 0600 whatever the umask (the scratch directory's files; otherwise
    the umask decides, as for any file the user's program writes). ``durable``: fsync the file
    and its folder, so that the new file survives a power loss too (checkpoints; the scratch
    files only have to survive the writing process). The temporary file is removed when the
    write raises; a process killed outright can leave it behind, hidden and safe to delete.
    """
    target = Path(path)
    fh, partial = _open_sibling(target, 0o600 if private else 0o666)
    try:
        with fh:
            if isinstance(data, bytes):
                fh.write(data)
            else:
                data(fh)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    if durable:
        _sync_folder(target.parent)
    return target


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (where the platform lets a folder be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    with contextlib.suppress(OSError):
        os.fsync(fd)
    os.close(fd)
