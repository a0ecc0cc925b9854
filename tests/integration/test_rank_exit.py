"""A rank that trained well exits well: after ``Trainer.fit`` its process group is freed whole,
and no gloo thread is left to run into the interpreter's finalization.

A gloo worker thread alive at exit can need the GIL of an interpreter that is gone while it lets
go of a tensor; the rank then aborts ("terminate called without an active exception", SIGABRT)
after a fit that ended well — the intermittent abort of the README's main job. The threads stay
when something keeps the group's Python object alive past ``destroy_process_group``, as
``import torch._dynamo`` does when DDP makes that import while the group exists.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "training_scripts" / "exit_threads.py"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_no_gloo_thread_is_left_when_a_rank_exits(tmp_path: Path, strategy: str) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), strategy],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    found = dict(re.findall(r"^exit-threads: rank (\d): (.*)$", run.stderr, re.M))
    assert sorted(found) == ["0", "1"], run.stderr
    for rank, names in found.items():
        assert not [name for name in names.split() if "gloo" in name], f"rank {rank}: {names}"
