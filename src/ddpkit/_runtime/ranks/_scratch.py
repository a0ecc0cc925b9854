"""The launcher's private scratch directory, and the sweep that removes those of dead launchers.

A launch keeps what its ranks pass back to it (error reports, stage counters; for ``ddp_spawn``
the pickled payload and rank 0's result) in one directory ``$TMPDIR/ddpkit-XXXXXXXX`` (``mkdtemp``:
mode 0700; every file in it 0600). The launcher removes it on every exit path it lives through.
The one it cannot live through is its own SIGKILL: nothing runs in a process then. So the
directory names its owner (an ``owner`` file: the launching process's pid, and on Linux the
process's start time, the boot and the pid namespace), and every launch first sweeps ``$TMPDIR``
for directories whose owner is gone.

A directory is removed only when the sweep can tell that its owner is gone: it belongs to this
user, is a real directory (never a symlink, never followed), holds an ``owner`` file that parses,
was made under this boot and in this pid namespace, and its pid is no longer running, or runs a
process that started at another time (the pid was reused). Anything else is left alone: a
directory being made right now (no ``owner`` file yet), other tools' ``ddpkit-*`` names, another
user's, another machine's or container's sharing the same ``/tmp``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from ddpkit.utilities._files import atomic_write
from ddpkit.utilities._procs import is_gone, read_proc

#: the name of every launcher's directory starts with this (``mkdtemp`` adds eight characters)
PREFIX = "ddpkit-"
#: the file in the directory that names the launching process
OWNER_FILE = "owner"
#: more than any owner file holds; a bigger one is not ours
_OWNER_MAX_BYTES = 4096
# O_NOFOLLOW: a symlink planted where the directory or its owner file is expected is an error,
# not a redirection.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def write_private(path: str | os.PathLike[str], data: bytes | Callable[[BinaryIO], object]) -> None:
    """Write ``data`` (bytes, or a function that writes into the open file) to ``path``, 0600
    whatever the umask, with ddpkit's one atomic write: a reader (the supervisor, a sweep) sees
    the old file or the whole new one, never half of it, and a symlink planted at ``path`` is
    replaced, never written through. Every file of the scratch directory is written this way:
    the directory is 0700, and its files are 0600 as well."""
    atomic_write(path, data, private=True)


def _this_boot() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _this_pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _owner_record() -> dict[str, Any]:
    """What the owner file says about this process. Start time, boot and pid namespace only
    where /proc has them (Linux); elsewhere the pid alone (a reused pid then counts as alive:
    the directory stays, which is the safe mistake)."""
    pid = os.getpid()
    me = read_proc(pid)
    return {
        "pid": pid,
        "start": None if me is None else me.start,
        "boot": _this_boot(),
        "pidns": _this_pid_namespace(),
    }


def make_private_dir() -> Path:
    """Make this launch's scratch directory (0700) and its ``owner`` file (0600).

    The owner file is written atomically (:func:`write_private`), so a sweep sees either no
    owner file (and skips the directory) or a whole one."""
    path = Path(tempfile.mkdtemp(prefix=PREFIX))
    try:
        write_private(path / OWNER_FILE, json.dumps(_owner_record()).encode())
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def _owner_is_gone(record: object, boot: str | None, pidns: str | None) -> bool:
    """True only when the record names a process that certainly no longer runs."""
    if not isinstance(record, dict):
        return False
    pid, start = record.get("pid"), record.get("start")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if start is not None and not isinstance(start, int):
        return False
    # Another boot, another machine, another container's pids: this sweep cannot tell.
    if record.get("boot") != boot or record.get("pidns") != pidns:
        return False
    return is_gone(pid, start)


def _read_owner(path: Path) -> object:
    """The parsed owner file of ``path`` if ``path`` is a directory of this user's (not a
    symlink); None otherwise. Opened relative to the directory's own descriptor, so nothing
    in between is followed."""
    dir_fd = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    try:
        st = os.fstat(dir_fd)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return None
        fd = os.open(OWNER_FILE, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            data = fh.read(_OWNER_MAX_BYTES + 1)
    finally:
        os.close(dir_fd)
    if len(data) > _OWNER_MAX_BYTES:
        return None
    result: object = json.loads(data)
    return result


def sweep_stale_dirs(root: Path | None = None) -> list[Path]:
    """Remove the scratch directories under ``root`` (default: ``tempfile.gettempdir()``) whose
    launcher is gone (see the module docstring for the rules); return those removed.

    Cheap enough for every launch: one scan of ``root``, and a stat and a small read only for
    ``ddpkit-*`` entries. Every error is ignored (an unreadable root or entry, a directory
    another sweep removed first): the sweep tidies up, it never fails a launch."""
    base = Path(tempfile.gettempdir()) if root is None else Path(root)
    try:
        with os.scandir(base) as entries:
            # d_type from the scan: symlinks and files are dropped without a stat.
            names = [
                e.name
                for e in entries
                if e.name.startswith(PREFIX) and e.is_dir(follow_symlinks=False)
            ]
    except OSError:
        return []
    if not names:
        return []
    boot, pidns = _this_boot(), _this_pid_namespace()
    removed = []
    for name in names:
        path = base / name
        try:
            record = _read_owner(path)
        except (OSError, ValueError):  # no owner file (yet), not a directory, not JSON
            continue
        if not _owner_is_gone(record, boot, pidns):
            continue
        # rmtree never follows a symlink (and refuses one at the top), so what it removes is
        # inside this directory. Another sweep may be removing it too: whoever finds it gone
        # counts it as removed.
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            removed.append(path)
    return removed
