"""A rank whose failure the launcher reports ends with exit status 1, its exit handlers run and
its unclosed files flushed, even while torch's gloo threads still run Python: the interpreter's
teardown, which such a thread aborts (SIGABRT, "Fatal Python error" or "terminate called
without an active exception" printed before ddpkit's report), is not run.

The CI failure this answers: a rank that raised died of SIGABRT in its teardown (a gloo thread
took the GIL; exit code -6) and its C++ abort message came first in the user's output. Here a
gloo future's Python callback wakes when the rank's exit begins and takes the GIL while the
script's teardown waits. Before the change the rank aborted so under each launcher.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

#: rank 1's way to fail late: ``fail_late(pair, gate)`` leaves a collective on ``pair`` whose
#: callback runs in gloo's thread until after the script's exit has begun; rank 0 joins that
#: collective with ``join_late(pair, gate)``, once rank 1 has passed ``gate``
PRELUDE = textwrap.dedent("""
    import atexit, signal, sys, threading, time
    import torch
    import torch.distributed as dist

    STARTED, EXITING = threading.Event(), threading.Event()


    def late(future):
        # In gloo's thread: wakes when the script's exit begins, and takes the GIL again once
        # the interpreter is being torn down.
        on_main = threading.current_thread() is threading.main_thread()
        print(f"the callback runs on the main thread: {on_main}", file=sys.stderr, flush=True)
        STARTED.set()
        if not on_main:  # (on the main thread it must not wait)
            EXITING.wait()
            time.sleep(0.5)


    class SlowTeardown:
        # What an interpreter's teardown may wait on (a DataLoader iterator joins its workers).
        def __del__(self):
            time.sleep(3.0)


    def exiting():
        print("rank 1's exit handler ran", file=sys.stderr)
        EXITING.set()


    def fail_late(pair, gate):
        global TEARDOWN
        TEARDOWN = SlowTeardown()
        atexit.register(exiting)
        # A rank with its own SIGTERM handler (a SLURM requeue, say) outlives the launcher's
        # SIGTERM, until its SIGKILL.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        work = dist.all_reduce(torch.ones(2), group=pair, async_op=True)
        pending = work.get_future().then(late)
        dist.barrier(group=gate)  # only now does rank 0 join: the callback is not run here
        STARTED.wait(60)
        return pending


    def join_late(pair, gate):
        dist.barrier(group=gate)
        dist.all_reduce(torch.ones(2), group=pair)
""")

SCRIPT = PRELUDE + textwrap.dedent("""
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    import ddpkit
    from ddpkit import Trainer

    STRATEGY, OUT = sys.argv[1], sys.argv[2]


    class Classifier(ddpkit.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(2, 2)

        def setup(self, stage):
            self.pair, self.gate = dist.new_group([0, 1]), dist.new_group([0, 1])

        def training_step(self, batch, batch_idx):
            if self.global_rank == 0 and batch_idx == 2:
                join_late(self.pair, self.gate)
            if self.global_rank == 1 and batch_idx == 2:
                self.unclosed = open(OUT, "w")
                self.unclosed.write("written, never closed")
                self.pending = fail_late(self.pair, self.gate)
                raise ValueError("bad batch 2 on rank 1")
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)


    if __name__ == "__main__":
        x = torch.randn(64, 2)
        data = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)
        trainer = Trainer(accelerator="cpu", devices=2, strategy=STRATEGY, max_epochs=1,
                          enable_model_summary=False, logger=False, enable_checkpointing=False,
                          enable_progress_bar=False)
        trainer.fit(Classifier(), data)
""")

#: the same failure in a script of raw torch.distributed, under ``ddpkit run``
RAW = PRELUDE + textwrap.dedent("""
    dist.init_process_group("gloo")
    pair, gate = dist.new_group([0, 1]), dist.new_group([0, 1])
    if dist.get_rank() == 0:
        join_late(pair, gate)
        time.sleep(30)  # until the launcher ends it
    else:
        pending = fail_late(pair, gate)
        raise ValueError("rank 1 failed")
""")


def _run(cwd: Path, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "DDPKIT_VERBOSE"}
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def _ended_cleanly(code: int, text: str, root_cause: str) -> None:
    assert code == 1, text
    # The root cause's own exit status: 1, so the report adds no "(exit code -6)".
    assert f"is the root cause, raised {root_cause}.\n" in text, text
    assert "Fatal Python error" not in text and "terminate called" not in text, text
    assert "Warning" not in text, text  # the exit adds nothing of its own to the report
    assert "the callback runs on the main thread: False" in text, text
    assert "rank 1's exit handler ran" in text, text


@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_a_failed_rank_ends_with_status_1_after_its_exit_handlers(
    tmp_path: Path, strategy: str
) -> None:
    script, out = tmp_path / "train.py", tmp_path / "rank1.txt"
    script.write_text(SCRIPT)
    code, text = _run(tmp_path, str(script), strategy, str(out))
    _ended_cleanly(code, text, "ValueError: bad batch 2 on rank 1")
    assert out.read_text() == "written, never closed"


def test_a_failed_rank_of_ddpkit_run_ends_the_same_way(tmp_path: Path) -> None:
    script = tmp_path / "raw.py"
    script.write_text(RAW)
    code, text = _run(tmp_path, "-m", "ddpkit", "run", "--nproc-per-node", "2", str(script))
    _ended_cleanly(code, text, "ValueError: rank 1 failed")
