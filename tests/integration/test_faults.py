"""Fault injection: every way a job can go wrong ends every rank, says what happened, and leaves
nothing behind.

Each case is a real run of ``fault_scripts/faulty_run.py`` (two CPU ranks, gloo) in a fresh
interpreter and a session of its own; the harness waits until no process of that session is left
and reports the survivors by pid. The targets (2 s for a failure, 3 s for a signal or a dead
parent) are measured by ``bench/reliability.py``; here the harness timeout (60 s) is only a hang
guard, far above them.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fault_scripts.harness import FaultRun, run_fault

LAUNCHERS = ["subprocess", "spawn"]
WHAT = {"subprocess": "DDP (subprocess launcher)", "spawn": "DDP (spawn launcher)"}
HANG_GUARD = 60.0

pytestmark = pytest.mark.timeout(150)


@pytest.fixture
def private_tmp(tmp_path: Path) -> Path:
    """The run's TMPDIR: empty before, and it must be empty after."""
    path = tmp_path / "tmp"
    path.mkdir()
    return path


def assert_clean(run: FaultRun) -> None:
    """The job ended by itself, no process of it is left, nothing of ddpkit's is on disk."""
    assert not run.timed_out, f"the job was still running after {HANG_GUARD} s:\n{run.stderr}"
    assert run.survivors == [], f"processes left running: {run.survivors}\n{run.stderr}"
    assert run.litter == [], f"left in TMPDIR: {run.litter}"


def report_of(run: FaultRun) -> str:
    """The ChildFailedError message as rank 0 / the parent printed it (torch prefixes rank 0's
    lines with ``[rank0]: ``)."""
    text = run.stderr.replace("[rank0]: ", "")
    start = text.index("ChildFailedError: ")
    return text[start:]


# -- a rank raises, a rank is killed -----------------------------------------------------------


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_rank_that_raises_ends_the_job_with_its_traceback_first(
    launcher: str, private_tmp: Path
) -> None:
    run = run_fault(launcher, "raise", rank=1, timeout=HANG_GUARD, tmpdir=private_tmp)
    assert_clean(run)
    assert run.returncode == 1
    report = report_of(run)
    pid1, pid0 = run.ranks[1], run.ranks[0]
    assert report.startswith(
        f"ChildFailedError: {WHAT[launcher]} failed: rank 1 (pid {pid1}) is the root cause, "
        f"raised RuntimeError: injected fault on rank 1"
    )
    traceback_at = report.index('raise RuntimeError(f"injected fault on rank {self.fault_rank}")')
    other_at = report.index(f"rank 0 (pid {pid0}): ")
    assert "--- rank 1 ---" in report
    assert traceback_at < other_at  # root cause and its traceback first, then the others


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_rank_killed_by_sigkill_is_named_with_the_signal(
    launcher: str, private_tmp: Path
) -> None:
    run = run_fault(launcher, "kill", rank=1, timeout=HANG_GUARD, tmpdir=private_tmp)
    assert_clean(run)
    assert run.returncode == 1
    report = report_of(run)
    assert report.startswith(
        f"ChildFailedError: {WHAT[launcher]} failed: rank 1 (pid {run.ranks[1]}) is the root "
        f"cause, killed by signal SIGKILL"
    )
    assert f"rank 0 (pid {run.ranks[0]}): " in report


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_rank_that_crashes_in_native_code_shows_where_python_was(
    launcher: str, private_tmp: Path
) -> None:
    """SIGABRT (a C++ std::terminate, a failed assert in a library): the report can only name
    the signal; ddpkit starts its ranks with Python's faulthandler on, so the rank's stderr
    shows every thread's Python stack, the crashing line among them."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    run = run_fault(launcher, "abort", rank=1, timeout=HANG_GUARD, tmpdir=private_tmp, env=env)
    assert_clean(run)
    assert run.returncode == 1
    assert report_of(run).startswith(
        f"ChildFailedError: {WHAT[launcher]} failed: rank 1 (pid {run.ranks[1]}) is the root "
        f"cause, killed by signal SIGABRT"
    )
    assert "Fatal Python error: Aborted" in run.stderr
    dump = run.stderr[run.stderr.index("Fatal Python error: Aborted") :]
    assert re.search(r'File ".*faulty_run\.py", line \d+ in inject', dump), dump


def test_rank_zero_failing_ends_the_children_and_keeps_its_own_traceback(
    private_tmp: Path,
) -> None:
    run = run_fault("subprocess", "raise", rank=0, timeout=HANG_GUARD, tmpdir=private_tmp)
    assert_clean(run)
    assert run.returncode == 1
    assert "RuntimeError: injected fault on rank 0" in run.stderr
    assert "ChildFailedError" not in run.stderr  # rank 0's own exception, as raised
    assert (
        f"ddpkit: rank 1 (pid {run.ranks[1]}): ended by ddpkit (SIGTERM) after rank 0 failed "
        f"(RuntimeError: injected fault on rank 0)"
    ) in run.stderr


def test_spawned_rank_zero_failing_is_the_root_cause(private_tmp: Path) -> None:
    run = run_fault("spawn", "raise", rank=0, timeout=HANG_GUARD, tmpdir=private_tmp)
    assert_clean(run)
    assert run.returncode == 1
    assert report_of(run).startswith(
        f"ChildFailedError: DDP (spawn launcher) failed: rank 0 (pid {run.ranks[0]}) is the "
        f"root cause, raised RuntimeError: injected fault on rank 0"
    )


# -- the parent dies, the parent is signalled ------------------------------------------------


#: what the killed launcher's scratch directory holds besides its owner file
LEFT_AFTER_SIGKILL = {"subprocess": "rank1.stages", "spawn": "payload.pkl"}


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_children_end_by_themselves_when_the_parent_is_killed(
    launcher: str, private_tmp: Path
) -> None:
    """...and the next run, which ends normally, cleans up after the killed one and leaves no
    process and no file of its own (the successful run every launcher must leave clean)."""
    run = run_fault(
        launcher,
        "none",
        rank=1,
        signal_parent=signal.SIGKILL,
        timeout=HANG_GUARD,
        tmpdir=private_tmp,
    )
    assert run.returncode == -signal.SIGKILL
    # Nothing ends them but the parent's death: the parent-death signal and their own watcher.
    assert not run.timed_out, run.stderr
    assert run.survivors == []
    assert set(run.ranks) == {0, 1}
    # Nothing could run in the killed launcher: its directory is left, private, naming it...
    (name,) = run.litter
    left = private_tmp / name
    assert name.startswith("ddpkit-")
    assert {"owner", LEFT_AFTER_SIGKILL[launcher]} <= {p.name for p in left.iterdir()}
    assert stat.S_IMODE(left.stat().st_mode) == 0o700
    modes = {p.name: oct(stat.S_IMODE(p.lstat().st_mode)) for p in left.iterdir()}
    assert set(modes.values()) == {"0o600"}, modes
    assert json.loads((left / "owner").read_text())["pid"] == run.pid
    # ...and the next launch, a successful run, removes it, then ends leaving no process and no
    # file of its own either.
    after = run_fault(launcher, "ok", timeout=HANG_GUARD, tmpdir=private_tmp)
    assert after.returncode == 0, after.stderr
    assert "ddpkit-fault: finished" in after.stderr
    assert_clean(after)


@pytest.mark.parametrize(
    ("launcher", "sig", "status"),
    [
        pytest.param("subprocess", signal.SIGINT, -signal.SIGINT, id="INT-subprocess"),
        pytest.param("subprocess", signal.SIGTERM, 143, id="TERM-subprocess"),
        pytest.param(
            "spawn",
            signal.SIGINT,
            -signal.SIGINT,
            id="INT-spawn",
            marks=pytest.mark.full_suite(
                "SIGINT and SIGTERM take the same way through each launcher (SignalFlag, the "
                "supervisor): TERM-spawn runs it under spawn, INT-subprocess SIGINT's own ending"
            ),
        ),
        pytest.param("spawn", signal.SIGTERM, 143, id="TERM-spawn"),
    ],
)
def test_a_signal_to_the_parent_ends_every_rank_with_the_conventional_status(
    launcher: str, sig: signal.Signals, status: int, private_tmp: Path
) -> None:
    """While it trains, the job listens on loopback only (see
    :func:`assert_listening_on_loopback_only`); then the signal ends every rank."""
    address = _non_loopback_address()
    wrap = _host_name_resolves_to(address, private_tmp.parent / "hosts") if address else ()
    run = run_fault(
        launcher,
        "none",
        rank=1,
        signal_parent=sig,
        timeout=HANG_GUARD,
        tmpdir=private_tmp,
        wrap=wrap,
        watch_sockets=True,
    )
    assert_listening_on_loopback_only(run)
    assert_clean(run)
    # SIGINT: KeyboardInterrupt, so Python ends by SIGINT (a shell shows 130); SIGTERM: 143.
    assert run.returncode == status
    assert f"ddpkit: {sig.name}: every rank of {WHAT[launcher]} ended:" in run.stderr
    assert f"rank 1 (pid {run.ranks[1]}): ended by ddpkit (SIGTERM) after" in run.stderr
    assert f"received {sig.name}" in run.stderr


# -- a rank stalls ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("launcher", "stalled"), [("subprocess", 1), ("subprocess", 0), ("spawn", 1)]
)
def test_a_stalled_rank_is_named_with_every_ranks_stack(
    launcher: str, stalled: int, private_tmp: Path
) -> None:
    run = run_fault(
        launcher, "stall", rank=stalled, stall_timeout=3, timeout=HANG_GUARD, tmpdir=private_tmp
    )
    assert_clean(run)
    assert run.returncode == 1
    waiter = 1 - stalled
    report = report_of(run)
    assert report.startswith(
        f"ChildFailedError: {WHAT[launcher]} failed: rank {stalled} (pid {run.ranks[stalled]}) "
        f"is the root cause, "
    )
    first_line = report.splitlines()[0]
    assert "never arrived at backward (collective #" in first_line
    # The root cause's stack is in the report: the loop it is stuck in.
    assert "in inject" in report.split(f"rank {waiter} (pid")[0]
    waiter_line = next(line for line in report.splitlines() if line.startswith(f"rank {waiter} ("))
    assert "waited" in waiter_line
    assert f"for rank(s) {stalled}, which never arrived (stall timeout 3 s)" in waiter_line
    # Every rank dumped the stack of each of its threads.
    for rank in (0, 1):
        assert f"ddpkit: the stack of every thread of rank {rank}:" in run.stderr


@pytest.mark.parametrize(
    "launcher",
    [
        "subprocess",
        pytest.param(
            "spawn",
            marks=pytest.mark.full_suite(
                "the unanswered alarm goes through the store and the supervisor, the same for "
                "both launchers (the subprocess run shows it); the stalled rank [spawn-1] above "
                "shows the spawn launcher's stall path"
            ),
        ),
    ],
)
def test_a_rank_stuck_holding_the_gil_is_named_although_it_cannot_answer(
    launcher: str, private_tmp: Path
) -> None:
    run = run_fault(
        launcher, "gil", rank=1, stall_timeout=3, timeout=HANG_GUARD, tmpdir=private_tmp
    )
    assert_clean(run)
    assert run.returncode == 1
    report = report_of(run)
    assert report.startswith(
        f"ChildFailedError: {WHAT[launcher]} failed: rank 1 (pid {run.ranks[1]}) is the root "
        f"cause, never arrived and did not answer the stall alarm; ended by ddpkit"
    )
    waiter_line = next(line for line in report.splitlines() if line.startswith("rank 0 ("))
    assert "for rank(s) 1, which never arrived (stall timeout 3 s)" in waiter_line


# -- ports and sockets -----------------------------------------------------------------------


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_busy_master_port_fails_before_any_rank_starts(launcher: str, private_tmp: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "MASTER_PORT": str(port)}
        run = run_fault(launcher, "ok", timeout=HANG_GUARD, env=env, tmpdir=private_tmp)
    assert_clean(run)
    assert run.returncode == 1
    assert run.ranks == {}  # no rank was started, so none can be orphaned
    assert f"LaunchError: MASTER_PORT={port}: the rendezvous store cannot listen on " in (
        run.stderr
    )
    assert f"127.0.0.1:{port}" in run.stderr


def _non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback, if there is one."""
    ip = shutil.which("ip")
    if ip is None:
        return None
    out = subprocess.run([ip, "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        address = line.split()[3].split("/")[0]
        if not ipaddress.ip_address(address).is_loopback:
            return address
    return None


def _host_name_resolves_to(address: str, hosts: Path) -> tuple[str, ...]:
    """A command prefix that runs the job in a mount namespace where this machine's host name
    resolves to ``address`` (as on most machines: the LAN address), or () when that cannot be
    arranged here (needs root and unshare)."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return ()
    hosts.write_text(f"127.0.0.1 localhost\n{address} {socket.gethostname()}\n")
    probe = subprocess.run(
        [
            unshare,
            "-m",
            "sh",
            "-c",
            f"mount --bind {hosts} /etc/hosts && getent hosts {socket.gethostname()}",
        ],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0 or address not in probe.stdout:
        return ()
    return (unshare, "-m", "sh", "-c", f'mount --bind {hosts} /etc/hosts && exec "$@"', "sh")


def assert_listening_on_loopback_only(run: FaultRun) -> None:
    """torch's store listens on every interface, and gloo on the address the host name
    resolves to; a local ddpkit run must not open either door. Where possible, the host name is
    made to resolve to a real non-loopback address of this machine, as it does on most (the
    signal tests' runs, watched while they train)."""
    assert run.listening, f"no listening socket seen: the run did not reach training\n{run.stderr}"
    doors = [s for s in run.listening if not ipaddress.ip_address(s[0]).is_loopback]
    assert doors == [], f"listening beyond loopback (address, port, pid): {doors}"


# -- ranks that do not make the same Trainer calls ------------------------------------------------


def test_a_stage_only_rank_zero_calls_fails_instead_of_waiting(private_tmp: Path) -> None:
    run = run_fault("subprocess", "rank0_stage", timeout=HANG_GUARD, tmpdir=private_tmp)
    assert_clean(run)
    assert run.returncode == 1
    assert (
        f"failed: rank 1 (pid {run.ranks[1]}) is the root cause, exited with code 0 while rank 0 "
        f"was still in validate: every rank must make the same Trainer calls"
    ) in run.stderr


def test_a_stage_only_the_other_ranks_call_fails_when_rank_zero_ends(private_tmp: Path) -> None:
    run = run_fault("subprocess", "children_stage", timeout=HANG_GUARD, tmpdir=private_tmp)
    assert_clean(run)
    assert run.returncode == 1
    assert (
        f"failed: rank 1 (pid {run.ranks[1]}) is the root cause, started its stage #2 after "
        f"rank 0's script had ended with 1: every rank must make the same Trainer calls"
    ) in run.stderr


DISTRIBUTED_TEST = """
import ipaddress
import os

import pytest
from fault_scripts.harness import listening_sockets


@pytest.mark.distributed(world_size=2, timeout=60)
def test_gloo_listens_on_loopback(dist):
    sockets = listening_sockets([os.getpid()])
    assert sockets, "no listening socket: the group is not up"
    doors = [s for s in sockets if not ipaddress.ip_address(s[0]).is_loopback]
    assert doors == [], doors
"""


def test_the_ranks_of_a_distributed_test_listen_on_loopback_only(tmp_path: Path) -> None:
    """``@pytest.mark.distributed`` ranks make their gloo connections on loopback, as DDPPlugin
    does, with this machine's host name resolving to a LAN address."""
    address = _non_loopback_address()
    wrap = _host_name_resolves_to(address, tmp_path / "hosts") if address else ()
    if not wrap:
        pytest.skip("the host name cannot be made to resolve to a LAN address here")
    (tmp_path / "test_ranks.py").write_text(DISTRIBUTED_TEST)
    path = [str(Path(__file__).parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    command = [*wrap, sys.executable, "-m", "pytest", "-p", "ddpkit.testing.pytest_plugin"]
    command += ["-q", "-p", "no:cacheprovider", "test_ranks.py"]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
