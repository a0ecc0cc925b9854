"""The flush a failed rank does before it ends without the interpreter's teardown (the whole
exit runs in tests/integration/test_failed_rank_exit.py)."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch.distributed  # noqa: F401  (its deprecated ``reduce_op`` proxy is among the objects)

from ddpkit._runtime.ranks._clean_exit import _flush_writers


def test_the_flush_writes_what_an_unclosed_file_holds_and_warns_nothing(tmp_path: Path) -> None:
    text, binary = tmp_path / "log.txt", tmp_path / "data.bin"
    with text.open("w") as kept_text, binary.open("wb") as kept_binary:
        kept_text.write("a line never flushed")
        kept_binary.write(b"\x00\x01")
        assert text.read_text() == "" and binary.read_bytes() == b""
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning would be printed by every failed rank
            _flush_writers()
        assert text.read_text() == "a line never flushed"
        assert binary.read_bytes() == b"\x00\x01"
