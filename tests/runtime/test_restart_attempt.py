"""The rank's side of a restart: which attempt it is (from the environment torchrun, ``ddpkit run``
and ddpkit's launchers give it), and which checkpoint a restarted fit resumes from."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from ddpkit._runtime.ranks._names import ENV_SKIP_STAGES
from ddpkit._runtime.ranks._protocol import skip_stage
from ddpkit._runtime.restart.attempt import (
    Attempt,
    attempt_in_process,
    current_attempt,
    in_process,
)
from ddpkit._runtime.restart.resume import RNG_KEY, is_complete, newest_checkpoint, resume_line
from ddpkit.utilities._procs import started_at


def save(path: Path, mtime: float, step: int = 0, ranks: int = 2) -> Path:
    rng = {"world_size": 2, "ranks": {str(r): {} for r in range(ranks)}}
    torch.save({"global_step": step, RNG_KEY: rng}, path)
    os.utime(path, (mtime, mtime))
    return path


def test_an_attempt_goes_to_the_ranks_in_their_environment_and_back() -> None:
    attempt = Attempt(number=2, max_restarts=3, cause="rank 1 (pid 7): exit code 1", started=5.5)
    env = attempt.env()
    assert env["TORCHELASTIC_RESTART_COUNT"] == "2"
    assert env["TORCHELASTIC_MAX_RESTARTS"] == "3"
    assert Attempt.from_env(env) == attempt
    assert Attempt().env() == {}  # a launch that cannot restart adds nothing
    # torchrun's own variables alone (no run start: the checkpoints since the agent started)
    torchrun = Attempt.from_env({"TORCHELASTIC_RESTART_COUNT": "1"})
    assert (torchrun.number, torchrun.started, torchrun.cause) == (1, None, "")
    assert torchrun.since() == started_at(os.getppid())
    assert Attempt.from_env({"TORCHELASTIC_RESTART_COUNT": "x"}).number == 0


def test_the_launching_process_learns_its_attempt_in_process_not_from_its_environment() -> None:
    assert not in_process()
    with attempt_in_process(Attempt(number=1, max_restarts=1)):
        assert in_process() and current_attempt().number == 1
    assert not in_process()
    assert current_attempt({"TORCHELASTIC_RESTART_COUNT": "3"}).number == 3


def test_the_newest_complete_checkpoint_since_the_run_started(tmp_path: Path) -> None:
    now = time.time()
    save(tmp_path / "epoch=0.ckpt", now - 30)  # an earlier run's: before the start
    save(tmp_path / "epoch=1.ckpt", now - 3, step=1)
    newest = save(tmp_path / "epoch=2.ckpt", now - 2, step=2)
    # A write cut short in place (Lightning writes its checkpoints so): never resumed from.
    cut = tmp_path / "epoch=3.ckpt"
    cut.write_bytes((tmp_path / "epoch=2.ckpt").read_bytes()[:-200])
    os.utime(cut, (now - 1, now - 1))
    save(tmp_path / ".epoch=4.ckpt.partial.tmp", now)  # hidden: a write under way
    # one rank's state at a failure (save_on_exception), named as any other save
    save(tmp_path / "epoch=2-step=9.ckpt", now, step=9, ranks=1)
    save(tmp_path / "last.ckpt", now, step=9, ranks=1)
    assert not is_complete(cut)
    assert newest_checkpoint([tmp_path, tmp_path / "missing"], since=now - 10) == newest
    assert newest_checkpoint([tmp_path], since=now + 10) is None
    assert newest_checkpoint([tmp_path], since=None) == newest


def test_the_line_a_restarted_fit_prints() -> None:
    attempt = Attempt(number=1, max_restarts=2, cause="rank 1 (pid 9): exit code 1")
    assert resume_line(attempt, "/c/last.ckpt", "epoch 2, global step 8") == (
        "ddpkit: restart 1 of 2 after rank 1 (pid 9): exit code 1: fit resumes from "
        "/c/last.ckpt (epoch 2, global step 8)"
    )
    assert resume_line(Attempt(number=1), None, "epoch 0, global step 0") == (
        "ddpkit: restart 1: fit starts over (epoch 0, global step 0)"
    )


def test_a_child_of_a_restarted_job_skips_the_stages_that_ended_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ddpkit._runtime.ranks._protocol as protocol

    monkeypatch.setattr(protocol, "_asked", iter(range(1, 10)))
    env = {ENV_SKIP_STAGES: "2"}
    assert [skip_stage(env) for _ in range(4)] == [True, True, False, False]
    assert skip_stage({}) is False
