"""``ddpkit.utilities._files.atomic_write``, the one atomic write: whole or not at all, 0600 when
private, the umask's mode otherwise."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from ddpkit.utilities._files import atomic_write


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_file_takes_the_umask_and_a_private_one_is_0600(tmp_path: Path, umask_022: None) -> None:
    assert atomic_write(tmp_path / "metrics.csv", b"a,b\n") == tmp_path / "metrics.csv"
    atomic_write(tmp_path / "rank1.json", b"{}", private=True)
    assert mode(tmp_path / "metrics.csv") == 0o644
    assert mode(tmp_path / "rank1.json") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv", "rank1.json"]


def test_a_writer_that_raises_leaves_the_old_file_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "last.ckpt"
    atomic_write(target, b"old", durable=True)

    def half_then_fail(fh: BinaryIO) -> None:
        fh.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(target, half_then_fail)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def _partial(folder: Path, writer: str, name: str = "last.ckpt") -> Path:
    path = folder / f".{name}.{writer}.0123abcd.tmp"
    path.write_bytes(b"half a checkpoint")
    return path


def test_the_partial_file_names_its_writer_and_a_sweep_removes_a_dead_writers(
    tmp_path: Path,
) -> None:
    from ddpkit.utilities._files import _machine, _writer, sweep_partials
    from ddpkit.utilities._procs import read_proc

    def half(fh: BinaryIO) -> None:
        (partial,) = tmp_path.glob(".last.ckpt.*.tmp")
        seen.append(partial.name)
        fh.write(b"x")

    seen: list[str] = []
    atomic_write(tmp_path / "last.ckpt", half)
    assert seen[0].startswith(f".last.ckpt.{_writer(os.getpid())}.")
    assert read_proc(999999) is None  # no process has that pid
    gone = _partial(tmp_path, _writer(os.getpid()).replace(f"-{os.getpid()}-", "-999999-"))
    alive = _partial(tmp_path, _writer(os.getpid()), "epoch=1.ckpt")  # this process: writing
    other_machine = _partial(tmp_path, f"{'f' * 8 if _machine() != 'f' * 8 else 'e' * 8}-1-1")
    reused = _partial(tmp_path, f"{_machine()}-{os.getpid()}-1")  # this pid, another start
    foreign = tmp_path / ".notes.txt.tmp"  # not one of ddpkit's
    foreign.write_bytes(b"")
    assert sorted(sweep_partials(tmp_path)) == sorted([gone, reused])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["last.ckpt", alive.name, other_machine.name, foreign.name]
    )
    assert sweep_partials(tmp_path / "missing") == []
