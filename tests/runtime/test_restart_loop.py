"""``run_attempts``: which failures start the job again, what each attempt is told, and the error
when the restarts are used up (the launchers' real runs are in tests/integration/test_restarts.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddpkit._runtime.restart.attempt import Attempt
from ddpkit._runtime.restart.attempts import restart_cause, run_attempts
from ddpkit.errors import ChildFailedError, LaunchError, MisconfigurationError, RankFailure


def killed(pid: int) -> ChildFailedError:
    return ChildFailedError(
        [RankFailure(rank=1, pid=pid, exitcode=-9), RankFailure(rank=0, pid=1, exitcode=None)],
        what="DDP",
    )


def test_a_failed_attempt_starts_again_with_its_cause_and_the_run_folder() -> None:
    seen: list[Attempt] = []
    folders: list[Path] = []

    def launch(attempt: Attempt) -> str:
        seen.append(attempt)
        assert attempt.run_dir is not None
        folders.append(Path(attempt.run_dir))
        assert folders[-1].is_dir() and oct(folders[-1].stat().st_mode & 0o777) == "0o700"
        if attempt.number < 2:
            raise killed(100 + attempt.number)
        return "done"

    retired: list[int] = []
    assert run_attempts(launch, 2, before_restart=lambda: retired.append(1)) == "done"
    assert [a.number for a in seen] == [0, 1, 2]
    assert seen[0].cause == ""
    assert seen[1].cause.startswith("rank 1 (pid 100): killed by signal SIGKILL")
    assert seen[2].cause.startswith("rank 1 (pid 101): ")
    assert len({a.started for a in seen}) == 1 and len(set(folders)) == 1
    assert retired == [1, 1]
    assert not folders[0].exists()  # the run folder goes with the launch


def test_restarts_used_up_raise_the_last_error_naming_every_attempt() -> None:
    def launch(attempt: Attempt) -> None:
        raise killed(200 + attempt.number)

    with pytest.raises(ChildFailedError) as info:
        run_attempts(launch, 1)
    assert info.value.root_cause.pid == 201
    (note,) = info.value.__notes__
    lines = note.splitlines()
    assert lines[0] == "ddpkit: max_restarts=1 used up; the root cause of each attempt:"
    assert lines[1].startswith("  attempt 0: rank 1 (pid 200): killed by signal SIGKILL")
    assert lines[2].startswith("  attempt 1: rank 1 (pid 201): killed by signal SIGKILL")


@pytest.mark.parametrize(
    "error",
    [
        KeyboardInterrupt(),
        SystemExit(143),
        MisconfigurationError("Trainer(x=1): bad"),
        LaunchError("MASTER_PORT=1 is taken"),
        ChildFailedError(
            [RankFailure(1, 5, 1, note="raised MisconfigurationError: monitor 'x' not logged")]
        ),
    ],
    ids=["sigint", "sigterm", "misconfiguration", "launch", "misconfiguration-on-rank-1"],
)
def test_an_interrupt_or_a_bad_value_is_never_restarted(error: BaseException) -> None:
    calls = []

    def launch(attempt: Attempt) -> None:
        calls.append(attempt.number)
        raise error

    with pytest.raises(type(error)):
        run_attempts(launch, 3)
    assert calls == [0]
    assert restart_cause(error) is None


def test_without_restarts_the_launch_runs_once_as_before() -> None:
    def launch(attempt: Attempt) -> int:
        assert attempt == Attempt() and attempt.env() == {}
        raise killed(7)

    with pytest.raises(ChildFailedError) as info:
        run_attempts(launch, 0)
    assert not getattr(info.value, "__notes__", [])


def test_rank_zeros_own_exception_is_a_cause_too() -> None:
    cause = restart_cause(RuntimeError("CUDA out of memory.\nmore"), rank=0)
    assert cause == f"rank 0 (pid {os.getpid()}): raised RuntimeError: CUDA out of memory."
