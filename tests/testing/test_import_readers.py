"""Lightning's stack reads RANK and LOCAL_RANK while it is imported: the warm start preloads it
anyway and each test's process computes those values again from its own environment
(ddpkit.testing._warm_start.import_readers). The session-fork side is in test_session_fork.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ddpkit.testing._warm_start.forked import ForkRequest
from ddpkit.testing._warm_start.preload import is_per_test
from ddpkit.testing._warm_start.warm import WarmStart

pytest.importorskip("pytorch_lightning")

# Every read of a per-test variable while Lightning's stack and torchmetrics are imported, by
# whom (as the session's watch and the preload guard see it), in a fresh interpreter.
SURVEY = """
import json, os, sys
import torch, torch.distributed
from ddpkit.testing._warm_start import import_readers
from ddpkit.testing._warm_start.preload import ReadEnviron, is_per_test

class Survey(ReadEnviron):
    seen = []
    def read(self, key):
        if is_per_test(key):
            self.seen.append((import_readers.reader_of(), key))

os.environ = Survey(os.environ)
import pytorch_lightning, lightning_fabric, lightning_utilities, torchmetrics
print(json.dumps(Survey.seen))
"""


@pytest.mark.timeout(90)
def test_every_per_test_read_of_lightnings_import_is_a_known_one() -> None:
    """A Lightning or torchmetrics version that reads another per-rank variable at import (or
    reads from another module) fails here: its value would be the session's in every rank."""
    # As the parent session collects: none of them set (fsspec reads every variable there is).
    env = {k: v for k, v in os.environ.items() if not is_per_test(k)}
    done = subprocess.run(
        [sys.executable, "-c", SURVEY], env=env, capture_output=True, text=True, timeout=80
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reads = {tuple(pair) for pair in json.loads(done.stdout.splitlines()[-1])}
    # The readers the module docstring names: each of them does read, at import.
    assert {reader for reader, _ in reads} == {
        "lightning_fabric.utilities.rank_zero",
        "torchmetrics.utilities.prints",
    }
    from ddpkit.testing._warm_start.import_readers import is_known_read

    assert [pair for pair in sorted(reads) if not is_known_read(*pair)] == []


PROBE = """
    import os
    from pytorch_lightning.utilities.rank_zero import rank_zero_only
    from torchmetrics.utilities import prints

    def test_has_its_own_rank():
        assert rank_zero_only.rank == int(os.environ["RANK"]) == 1
        assert prints.rank_zero_only.rank == int(os.environ["LOCAL_RANK"]) == 1
"""


@pytest.mark.timeout(300)
def test_the_fresh_interpreter_zygote_preloads_lightning_and_each_rank_has_its_rank(
    tmp_path: Path,
) -> None:
    """The zygote of an xdist worker (or of a session that cannot fork itself) preloads
    Lightning instead of leaving it to each test, and a fork's values are its own rank's."""
    (tmp_path / "test_probe.py").write_text(textwrap.dedent(PROBE))
    env = dict(os.environ)
    said: list[str] = []
    warm = WarmStart(tmp_path, said.append)
    try:
        warm.collected(["torch", "pytorch_lightning", "torchmetrics"], env)
        zygote = warm.zygote_for(env)
        assert zygote is not None, warm.off
        info = zygote.info
        assert info is not None and info.hazard is None
        assert info.left == {}, info.left  # pytorch_lightning is not left to each test
        request = ForkRequest(
            args=("-p", "no:cacheprovider", "-q", str(tmp_path / "test_probe.py")),
            env={**env, "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"},
            cwd=str(tmp_path),
            log=str(tmp_path / "probe.log"),
            fd_env={},
        )
        code = zygote.fork(request).wait(timeout=120)
        assert code == 0, (tmp_path / "probe.log").read_text()
    finally:
        warm.close()
    assert said == []
