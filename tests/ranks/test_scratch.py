"""The launcher's scratch directory: private, owned, and swept once its owner is gone.

Owners are real processes: this one (alive), a finished ``python -c pass`` (gone), one that has
exited but was not reaped yet (a zombie: gone), and this process's pid with another start time
(the pid was reused).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddpkit._runtime.ranks._errorfile import read_error_file, write_error_file
from ddpkit._runtime.ranks._scratch import (
    OWNER_FILE,
    PREFIX,
    make_private_dir,
    sweep_stale_dirs,
    write_private,
)

pytestmark = pytest.mark.timeout(60)


def proc_stat(pid: int) -> tuple[str, int]:
    """(state, start time) of ``pid``, read here independently of the module under test."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temp root: make_private_dir makes its directories here."""
    path = tmp_path / "tmp"
    path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


def owned_dir(root: Path, **changes: Any) -> Path:
    """A real scratch directory whose owner record is this process's, with ``changes``."""
    path = make_private_dir()
    assert path.parent == root
    if changes:
        record = json.loads((path / OWNER_FILE).read_text())
        record.update(changes)
        (path / OWNER_FILE).write_text(json.dumps(record))
    (path / "rank1.stages").write_text("1")
    return path


@pytest.fixture
def gone_pid() -> tuple[int, int]:
    """The pid and start time of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    _, start = proc_stat(proc.pid)  # a zombie at worst until the wait below
    proc.wait()
    return proc.pid, start


@pytest.fixture
def zombie() -> Iterator[tuple[int, int]]:
    """A child that has exited but is not reaped yet: its /proc entry is still there."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while proc_stat(proc.pid)[0] != "Z":
            time.sleep(0.01)
        yield proc.pid, proc_stat(proc.pid)[1]
    finally:
        proc.wait()


# -- the directory --------------------------------------------------------------------------------


def test_the_directory_is_private_and_names_this_process(root: Path) -> None:
    path = make_private_dir()
    assert path.parent == root
    assert path.name.startswith(PREFIX)
    assert mode(path) == 0o700
    assert sorted(p.name for p in path.iterdir()) == [OWNER_FILE]
    assert mode(path / OWNER_FILE) == 0o600
    record = json.loads((path / OWNER_FILE).read_text())
    assert record["pid"] == os.getpid()
    assert record["start"] == proc_stat(os.getpid())[1]


def test_files_are_created_0600_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        write_private(tmp_path / "payload.pkl", b"x")
        write_error_file(tmp_path / "rank1.json", "Traceback ...")
    finally:
        os.umask(previous)
    assert mode(tmp_path / "payload.pkl") == 0o600
    assert mode(tmp_path / "rank1.json") == 0o600
    record = read_error_file(tmp_path / "rank1.json")
    assert record is not None
    assert record.traceback == "Traceback ..."


def test_a_file_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / "result.pt").symlink_to(target)
    write_private(tmp_path / "result.pt", b"new")
    # The rename replaced the link itself: the file it pointed at is untouched.
    assert not (tmp_path / "result.pt").is_symlink()
    assert (tmp_path / "result.pt").read_bytes() == b"new"
    assert mode(tmp_path / "result.pt") == 0o600
    assert target.read_text() == "keep"


# -- what the sweep removes -----------------------------------------------------------------------


def test_a_directory_whose_owner_has_exited_is_removed(
    root: Path, gone_pid: tuple[int, int]
) -> None:
    pid, start = gone_pid
    stale = owned_dir(root, pid=pid, start=start)
    assert sweep_stale_dirs(root) == [stale]
    assert not stale.exists()


def test_a_directory_whose_owner_is_an_unreaped_zombie_is_removed(
    root: Path, zombie: tuple[int, int]
) -> None:
    pid, start = zombie
    stale = owned_dir(root, pid=pid, start=start)
    assert sweep_stale_dirs(root) == [stale]


def test_a_reused_pid_is_not_mistaken_for_the_owner(root: Path) -> None:
    # This process runs under the recorded pid, but it is not the one that made the directory.
    stale = owned_dir(root, start=proc_stat(os.getpid())[1] + 1)
    assert sweep_stale_dirs(root) == [stale]


def test_the_default_root_is_the_temp_root(root: Path, gone_pid: tuple[int, int]) -> None:
    stale = owned_dir(root, pid=gone_pid[0], start=gone_pid[1])
    assert sweep_stale_dirs() == [stale]


def test_only_stale_directories_go_and_a_second_sweep_finds_nothing(
    root: Path, gone_pid: tuple[int, int]
) -> None:
    live = owned_dir(root)
    stale = owned_dir(root, pid=gone_pid[0], start=gone_pid[1])
    assert sweep_stale_dirs(root) == [stale]
    assert sweep_stale_dirs(root) == []
    assert sorted(root.iterdir()) == [live]
    assert (live / "rank1.stages").read_text() == "1"


def test_a_symlink_inside_a_stale_directory_is_removed_not_followed(
    root: Path, tmp_path: Path, gone_pid: tuple[int, int]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data").write_text("keep")
    stale = owned_dir(root, pid=gone_pid[0], start=gone_pid[1])
    (stale / "link").symlink_to(outside)
    assert sweep_stale_dirs(root) == [stale]
    assert (outside / "data").read_text() == "keep"


# -- what the sweep leaves alone ------------------------------------------------------------------


def test_a_directory_whose_owner_runs_stays(root: Path) -> None:
    live = owned_dir(root)
    assert sweep_stale_dirs(root) == []
    assert (live / OWNER_FILE).exists()


@pytest.mark.parametrize(
    "content",
    [None, "", "{not json", "[1, 2]", '{"pid": "12"}', '{"pid": true}', '{"start": 5}'],
    ids=["no-owner-file", "empty", "not-json", "not-a-record", "pid-text", "pid-bool", "no-pid"],
)
def test_a_directory_without_a_readable_owner_stays(root: Path, content: str | None) -> None:
    # No owner file: a launcher making its directory right now, or another tool's.
    path = Path(tempfile.mkdtemp(prefix=PREFIX))
    if content is not None:
        (path / OWNER_FILE).write_text(content)
    assert sweep_stale_dirs(root) == []
    assert path.is_dir()


@pytest.mark.parametrize("field", ["boot", "pidns"])
def test_a_directory_from_another_boot_or_pid_namespace_stays(
    root: Path, gone_pid: tuple[int, int], field: str
) -> None:
    # Its pid means nothing here: another machine or container may share this temp root.
    path = owned_dir(root, pid=gone_pid[0], start=gone_pid[1], **{field: "elsewhere"})
    assert sweep_stale_dirs(root) == []
    assert path.is_dir()


def test_a_symlink_named_like_a_scratch_directory_is_not_followed(
    root: Path, tmp_path: Path, gone_pid: tuple[int, int]
) -> None:
    # The target looks exactly like a stale directory; the link to it must not lead there.
    target = tmp_path / "target"
    target.mkdir()
    (target / OWNER_FILE).write_text(json.dumps(owner_of(root, gone_pid)))
    (target / "data").write_text("keep")
    link = root / f"{PREFIX}x"
    link.symlink_to(target)
    assert sweep_stale_dirs(root) == []
    assert link.is_symlink()
    assert (target / "data").read_text() == "keep"
    # ...and the same record in a real directory is stale: the link alone saved the target.
    (root / f"{PREFIX}real").mkdir()
    (root / f"{PREFIX}real" / OWNER_FILE).write_text(json.dumps(owner_of(root, gone_pid)))
    assert sweep_stale_dirs(root) == [root / f"{PREFIX}real"]


def owner_of(root: Path, gone_pid: tuple[int, int]) -> dict[str, Any]:
    """A whole owner record naming the gone process (taken from a real one)."""
    path = make_private_dir()
    record: dict[str, Any] = json.loads((path / OWNER_FILE).read_text())
    for child in path.iterdir():
        child.unlink()
    path.rmdir()
    record.update(pid=gone_pid[0], start=gone_pid[1])
    return record


def test_files_and_other_names_stay(root: Path, gone_pid: tuple[int, int]) -> None:
    (root / f"{PREFIX}cpu.lock").write_text("")  # a file, as a lock file would be
    other = root / "other-tool-x"
    other.mkdir()
    (other / OWNER_FILE).write_text(json.dumps(owner_of(root, gone_pid)))
    assert sweep_stale_dirs(root) == []
    assert sorted(p.name for p in root.iterdir()) == [f"{PREFIX}cpu.lock", "other-tool-x"]


@pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")
def test_another_users_directory_stays(root: Path, gone_pid: tuple[int, int]) -> None:
    path = owned_dir(root, pid=gone_pid[0], start=gone_pid[1])
    os.chown(path, 4242, 4242)
    assert sweep_stale_dirs(root) == []
    assert path.is_dir()


def test_a_missing_root_is_nothing_to_sweep(tmp_path: Path) -> None:
    assert sweep_stale_dirs(tmp_path / "missing") == []
