"""``ddpkit run`` starts the ranks of a raw torch.distributed script (and of a ddpkit Trainer
script) with torchrun's environment, and supervises them: a raising rank ends the job with its
traceback first, the parent's SIGKILL takes every rank, a stall shows every rank's stacks, and
--max-restarts starts the job again on a fresh store. bench/run_vs_torchrun.py times the same
faults against torchrun.

Each launch costs two torch imports (about 4 s on two cores): five launches. Four of them are
docs/launchers/run.md's own commands, read from the page (which marks them run here), with a tag
added: their output is checked against the page's, and their processes and reports here.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest
from clusters import EXAMPLE, PYTHON, REPO, Finished, Started, clean_env, read_reports, run

sys.path.insert(0, str(REPO / "tests" / "docs"))
from doc_blocks import Command, assert_transcript, console_commands

RAW = Path(__file__).resolve().parent / "fault_scripts" / "raw_dist.py"
DDPKIT_RUN = [PYTHON, "-m", "ddpkit", "run"]
PAGE = REPO / "docs" / "launchers" / "run.md"


def _page_command(needle: str) -> Command:
    """The page's one command that contains ``needle``."""
    (command,) = console_commands(PAGE, needle)
    return command


def _as_on_the_page(tmp_path: Path, command: Command, *extra: str) -> Finished:
    """The page's command as written (the set-up's ``ddpkit``, from the clone's root), with
    ``extra`` arguments for the script; its output checked against the page's, if it shows any."""
    words = shlex.split(command.text, comments=True)
    assert words[:2] == ["ddpkit", "run"], words
    words[0] = str(Path(PYTHON).parent / "ddpkit")
    finished = run([*words, *extra], env=clean_env(tmp_path), log=tmp_path / "run.log", timeout=120)
    if command.expected is not None:
        assert_transcript(f"{PAGE}:{command.line}", command.expected, finished.output)
    return finished


def _alive_with(tag: str) -> list[int]:
    """Processes whose command line holds ``tag`` (every rank of one run has it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if tag.encode() in cmdline:
                found.append(int(entry.name))
    return found


def _raw(tmp_path: Path, fault: str, *flags: str, timeout: float = 120) -> tuple[str, Finished]:
    tag = uuid.uuid4().hex
    command = [*DDPKIT_RUN, "--nproc-per-node", "2", *flags, str(RAW), "--fault", fault,
               "--tag", tag]  # fmt: skip
    finished = run(command, env=clean_env(tmp_path), log=tmp_path / "run.log", timeout=timeout)
    return tag, finished


@pytest.mark.timeout(150)
def test_a_raising_rank_ends_the_job_root_cause_first(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    finished = _as_on_the_page(tmp_path, _page_command("--fault raise"), "--tag", tag)
    assert finished.returncode == 1, finished.output
    report = finished.output.split("ddpkit run failed: ", 1)[1]
    first, rest = report.split("\n", 1)
    assert first.startswith("rank 1 (pid ") and "is the root cause, raised RuntimeError: " \
        "injected fault on rank 1." in first  # fmt: skip
    # Its traceback, from the script's own frame (no launcher frames), then the others' fates.
    # (ddpkit run gives the script's path whole, as torchrun does.)
    assert f'--- rank 1 ---\nTraceback (most recent call last):\n  File "{RAW}"' in rest
    assert "rank 0 (pid " in rest and "ended by ddpkit (SIGTERM) after rank 1 failed" in rest
    assert _alive_with(tag) == []


@pytest.mark.timeout(150)
def test_the_parents_sigkill_takes_every_rank(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    command = [*DDPKIT_RUN, "--nproc-per-node", "2", str(RAW), "--fault", "none", "--tag", tag]
    started = Started(command, env=clean_env(tmp_path), log=tmp_path / "run.log")
    try:
        deadline = time.monotonic() + 100
        while started.output().count("raw: rank ") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        ranks = [p for p in _alive_with(tag) if p != started.pid]
        assert len(ranks) == 2, started.output()
        os.kill(started.pid, signal.SIGKILL)  # the launcher only: its ranks must follow
        started.proc.wait()
        deadline = time.monotonic() + 30
        while _alive_with(tag) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive_with(tag) == []
    finally:
        started.kill()
        for pid in _alive_with(tag):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(150)
def test_a_stall_shows_the_stacks_and_the_rank_that_never_arrived(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    finished = _as_on_the_page(tmp_path, _page_command("--fault stall"), "--tag", tag)
    output = finished.output
    assert finished.returncode == 1, output
    report = output.split("ddpkit run failed: ", 1)[1]
    assert report.startswith("rank 1 (pid ") and "never arrived at all_reduce" in report
    # Its stack shows where it is: the script's stall loop, in the main thread.
    assert f'File "{RAW}", line ' in report.split("--- rank 1 ---", 1)[1]
    # Rank 0 waited for it (its own stall note, or its collective's error once rank 1 ended).
    assert "\nrank 0 (pid " in report
    assert _alive_with(tag) == []


@pytest.mark.full_suite(
    "tests/integration/test_restarts.py's test_ddpkit_run_max_restarts_resumes_the_same_way "
    "restarts a 2-rank ddpkit run job the same way (attempt 0 reported, attempt 1 with "
    "TORCHELASTIC_RESTART_COUNT=1 meets on a fresh store and trains to the end)"
)
@pytest.mark.timeout(200)
def test_max_restarts_starts_the_job_again_with_the_restart_count(tmp_path: Path) -> None:
    _, finished = _raw(tmp_path, "flaky", "--max-restarts", "2")
    output = finished.output
    assert finished.returncode == 0, output
    assert "ddpkit run failed: rank 1 (pid " in output  # attempt 0, reported...
    assert "restarting the job (2 restart(s) left): attempt 1 gets " \
        "TORCHELASTIC_RESTART_COUNT=1" in output  # fmt: skip
    # ...then both ranks of attempt 1 met on a fresh store and finished.
    assert "raw: rank 0 done attempt 1 sum 2" in output
    assert "raw: rank 1 done attempt 1 sum 2" in output
    assert "attempt 2" not in output


@pytest.mark.timeout(150)
def test_a_ddpkit_trainer_under_ddpkit_run_plans_external(tmp_path: Path) -> None:
    """The page's first two commands: a raw script that ends well, and the example's Trainer."""
    ok = _as_on_the_page(tmp_path, _page_command("raw_dist.py --fault ok"))
    ok.check()
    assert "raw: rank 0 done attempt 0 sum 2" in ok.output
    assert "raw: rank 1 done attempt 0 sum 2" in ok.output
    # Each rank's stall watch (sampler and watchdog) stopped when the script ended, before its
    # atexit handlers: a daemon thread still inside a TCPStore call when the interpreter
    # finalizes aborts the rank after a script that ended well (SIGABRT, "terminate called
    # without an active exception").
    for rank in (0, 1):
        found = re.search(rf"raw: rank {rank} threads at exit: (.*)", ok.output)
        assert found is not None, ok.output
        assert not {"ddpkit-run-sampler", "ddpkit-stall-watch"} & set(found[1].split()), found[0]
    reports = tmp_path / "reports"
    command = _page_command(str(EXAMPLE.relative_to(REPO)))
    extra = ("--report-dir", str(reports), "--root-dir", str(tmp_path / "r"))
    _as_on_the_page(tmp_path, command, *extra).check()
    ranks = read_reports(reports)
    assert [r["launcher"] for r in ranks] == ["external"] * 2
    assert [r["environment"] for r in ranks] == ["TorchElasticEnvironment"] * 2
    assert [r["children"] for r in ranks] == [[], []]
    assert len({r["weights"] for r in ranks}) == 1
    given = ranks[0]["launcher_variables"]
    assert given["TORCHELASTIC_RESTART_COUNT"] == "0"
    assert given["TORCHELASTIC_ERROR_FILE"].endswith("rank0.torchelastic.json")
