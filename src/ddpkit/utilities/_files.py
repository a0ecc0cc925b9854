"""The one atomic write: a file appears whole or not at all.

Everything ddpkit writes that someone may read while it is being written goes through
:func:`atomic_write`: a rank's error report and stage counter (read by the supervisor while the
rank runs), an isolated test's records, checkpoints, ``metrics.csv``, ``hparams.yaml`` and the
plot of a run. The data goes to a hidden sibling ``.<name>.<writer>.<random>.tmp`` in the same
folder, which is then renamed over the target (a rename within one file system is atomic): a
reader sees the old file or the whole new one, never half of it.

A writer killed outright (SIGKILL, the OOM killer) leaves its partial file behind. The partial's
name says who wrote it (``<writer>``: this machine — host, boot, pid namespace, as a short hash —
then the pid and its start time), so :func:`sweep_partials` can remove the partials of writers
that are gone: a checkpoint save sweeps its folder first, and a ``ModelCheckpoint`` sweeps its
directory when a fit starts. A partial of another machine (a shared file system), or of a writer
that still runs, is left alone.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ddpkit.utilities._paths import local_path
from ddpkit.utilities._procs import is_gone, read_proc

# O_NOFOLLOW: a symlink planted where the temporary file goes is an error, not a redirection.
_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


#: ``.<name>.<machine>-<pid>-<start>.<random>.tmp``: the partial file of a write under way
_PARTIAL = re.compile(
    r"^\.(?P<name>.+)\.(?P<machine>[0-9a-f]{8})-(?P<pid>\d+)-(?P<start>\d+)\.[0-9a-f]{8}\.tmp$"
)


@functools.cache
def _machine() -> str:
    """This host, boot and pid namespace, hashed: a pid means one process only within them."""
    parts = [socket.gethostname()]
    with contextlib.suppress(OSError):
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
    with contextlib.suppress(OSError):
        parts.append(os.readlink("/proc/self/ns/pid"))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]


@functools.lru_cache(maxsize=8)  # a pid's start time never changes; a fork has a new pid
def _writer(pid: int) -> str:
    info = read_proc(pid)
    return f"{_machine()}-{pid}-{0 if info is None else info.start}"


def _open_sibling(target: Path, mode: int) -> tuple[BinaryIO, Path]:
    """A new hidden file next to ``target`` (O_EXCL: never one that another writer holds),
    named for this process so that a sweep can tell when its writer is gone."""
    writer = _writer(os.getpid())
    while True:
        partial = target.with_name(f".{target.name}.{writer}.{secrets.token_hex(4)}.tmp")
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
    target = local_path(path)
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


def sweep_partials(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the partial files :func:`atomic_write` left in ``folder`` when their writer was
    killed; return those removed. Only this machine's partials whose writing process no longer
    runs (or whose pid now names a process that started at another time) go. Errors are ignored:
    the sweep tidies up, it never fails a save."""
    removed: list[Path] = []
    folder = local_path(folder)
    try:
        with os.scandir(folder) as entries:
            names = [
                e.name
                for e in entries
                if e.name.endswith(".tmp") and e.is_file(follow_symlinks=False)
            ]
    except OSError:
        return removed
    machine = _machine()
    for name in names:
        found = _PARTIAL.match(name)
        if found is None or found["machine"] != machine:
            continue
        # Where /proc is missing the name holds start 0: not known.
        if not is_gone(int(found["pid"]), int(found["start"]) or None):
            continue
        path = Path(folder) / name
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed
