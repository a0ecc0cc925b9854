"""``ddpkit.utilities.files.atomic_write``, the one atomic write: whole or not at all, 0600 when
private, the umask's mode otherwise."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from ddpkit.utilities.files import atomic_write


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
