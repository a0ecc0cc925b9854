"""Real launchers for the cluster tests: two "hosts" made of network namespaces, a throw-away
SLURM cluster, and the example every rank runs (examples/cluster_train.py).

Everything here is made and removed by the tests: namespaces hold private addresses only
(10.213.0.0/24, no route out), the SLURM cluster lives in a temp dir (scripts/slurm/up.sh and
down.sh). Where a component cannot exist here, the test says why in its skip reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "EXAMPLE",
    "PYTHON",
    "REPO",
    "Hosts",
    "SlurmCluster",
    "assert_trained_together",
    "clean_env",
    "read_reports",
    "run",
    "slurm_cluster",
    "two_hosts",
]

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "cluster_train.py"
PYTHON = sys.executable
STEPS = 4  # the example's default --steps

# Variables a launcher sets; the tests start every launch without them, so that nothing from
# the shell that runs pytest (or srun, which exports the caller's whole environment) leaks in.
_LAUNCHER_VARIABLES = frozenset(
    {"RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
     "MASTER_ADDR", "MASTER_PORT", "PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER"}
)  # fmt: skip
_LAUNCHER_PREFIXES = ("SLURM_", "TORCHELASTIC_", "DDPKIT_", "ROLE_", "GROUP_")


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """This process's environment without launcher variables; TMPDIR in ``tmp`` (torchrun
    leaves a torchelastic_* folder there per run); one thread per rank on this small machine."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _LAUNCHER_VARIABLES and not k.startswith(_LAUNCHER_PREFIXES)
    }
    env.update(TMPDIR=str(tmp), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


@dataclass
class Finished:
    command: list[str]
    returncode: int
    output: str

    def check(self, context: Callable[[], str] | None = None) -> Finished:
        """Fail with the command's output (and ``context()``, e.g. the daemons' logs)."""
        if self.returncode != 0:
            more = f"\n{context()}" if context is not None else ""
            pytest.fail(f"{self.command} exited {self.returncode}:\n{self.output}{more}")
        return self


class Started:
    """A command running in a session of its own, its output in a file: ended with its whole
    process group if the test gives up on it."""

    def __init__(self, command: Sequence[str], *, env: dict[str, str], log: Path) -> None:
        self.command = list(command)
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.command, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float, context: Callable[[], str] | None = None) -> Finished:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            more = f"\n{context()}" if context is not None else ""
            self.kill()
            pytest.fail(f"{self.command} still running after {timeout} s:\n{self.output()}{more}")
        return Finished(self.command, code, self.output())

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def run(
    command: Sequence[str],
    *,
    env: dict[str, str],
    log: Path,
    timeout: float,
    context: Callable[[], str] | None = None,
) -> Finished:
    """Run ``command`` to its end (``context()`` joins the message if it times out)."""
    started = Started(command, env=env, log=log)
    try:
        return started.wait(timeout, context)
    finally:
        started.kill()


def read_reports(folder: Path) -> list[dict[str, Any]]:
    """Every rank's report (examples/cluster_train.py --report-dir), by global rank."""
    reports = [json.loads(p.read_text()) for p in folder.glob("rank*.json")]
    return sorted(reports, key=lambda r: int(r["global_rank"]))


def assert_trained_together(reports: list[dict[str, Any]], world_size: int) -> None:
    """Every rank of ``world_size`` reported, trained, and ends with the same weights."""
    assert [r["global_rank"] for r in reports] == list(range(world_size)), reports
    assert {r["world_size"] for r in reports} == {world_size}
    assert {r["global_step"] for r in reports} == {STEPS}
    assert len({r["weights"] for r in reports}) == 1, [r["weights"] for r in reports]
    assert reports[0]["weights"] != reports[0]["initial_weights"]  # the steps changed them


# -- two hosts ---------------------------------------------------------------------------------


@dataclass
class Hosts:
    """Two machines to run nodes on: network namespaces joined by a veth pair, or, where
    namespaces cannot be made, this machine twice on loopback (``why_loopback`` says why)."""

    names: tuple[str, str]
    addresses: tuple[str, str]
    why_loopback: str | None = None
    made: list[str] = field(default_factory=list)

    @property
    def namespaced(self) -> bool:
        return self.why_loopback is None

    def on(self, node: int, command: Sequence[str]) -> list[str]:
        """``command`` as run on host ``node`` (0 or 1)."""
        if not self.namespaced:
            return list(command)
        return ["ip", "netns", "exec", self.names[node], *command]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def _cannot_make_namespaces() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    return None


@contextlib.contextmanager
def two_hosts(*, require_namespaces: bool = False) -> Iterator[Hosts]:
    """Two hosts ``<tag>n1`` and ``<tag>n2`` at 10.213.0.1 and .2. Inside each, the machine's
    host name resolves to the namespace's own address (gloo binds to it; without this it falls
    back to 127.0.0.1 and the peer's connections are refused) and both node names resolve."""
    why = _cannot_make_namespaces()
    tag = f"dk{os.getpid() % 100000}"
    hosts = Hosts(names=(f"{tag}n1", f"{tag}n2"), addresses=("10.213.0.1", "10.213.0.2"))
    if why is None:
        try:
            for name in hosts.names:
                _ip("netns", "add", name)
                hosts.made.append(name)
            a, b = hosts.names
            _ip("-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b)
            for name, address in zip(hosts.names, hosts.addresses):
                _ip("-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
                _ip("-n", name, "link", "set", "lo", "up")
                _ip("-n", name, "link", "set", "eth0", "up")
                _write_hosts_file(hosts, name, address)
        except (subprocess.CalledProcessError, OSError) as err:
            detail = getattr(err, "stderr", "") or str(err)
            why = f"`ip netns` failed here: {detail.strip()}"
            _remove(hosts)
    if why is not None:
        if require_namespaces:
            pytest.skip(f"two hosts need network namespaces: {why}")
        hosts = Hosts(names=("localhost", "localhost"), addresses=("127.0.0.1",) * 2,
                      why_loopback=why)  # fmt: skip
    try:
        yield hosts
    finally:
        _remove(hosts)


def _write_hosts_file(hosts: Hosts, name: str, own_address: str) -> None:
    folder = Path("/etc/netns") / name
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["127.0.0.1 localhost", f"{own_address} {os.uname().nodename}"]
    lines += [f"{a} {n}" for n, a in zip(hosts.names, hosts.addresses)]
    (folder / "hosts").write_text("\n".join(lines) + "\n")


def _remove(hosts: Hosts) -> None:
    # Deleting a namespace deletes its end of the veth pair, and with it the other end.
    for name in reversed(hosts.made):
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30, check=False)
        folder = Path("/etc/netns") / name
        with contextlib.suppress(FileNotFoundError):
            (folder / "hosts").unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()
    with contextlib.suppress(OSError):
        Path("/etc/netns").rmdir()  # only when empty: someone else's namespaces stay
    hosts.made.clear()


# -- SLURM -------------------------------------------------------------------------------------


@dataclass
class SlurmCluster:
    """A running throw-away cluster: its config, and how to run a client against it."""

    folder: Path
    hosts: Hosts | None = None

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    def env(self, tmp: Path, **extra: str) -> dict[str, str]:
        return clean_env(tmp, SLURM_CONF=str(self.conf), **extra)

    def client(self, command: Sequence[str]) -> list[str]:
        """Clients of a cluster in namespaces run in the first one (slurmd calls srun back)."""
        return self.hosts.on(0, command) if self.hosts is not None else list(command)

    def sbatch(
        self, args: Sequence[str], *, env: dict[str, str], log: Path, timeout: float
    ) -> Finished:
        """``sbatch ARGS`` run to the job's end, as ``sbatch --wait`` does, with the job's exit
        status as the returncode. ``--wait`` polls the job at 2, 4, 8, 10, 10 ... s, which on a
        loaded machine cost each job up to 30 s of waiting; this polls ``scontrol`` every 0.2 s.
        A job still running at ``timeout`` is cancelled and fails the test."""
        submitted = run(
            self.client(["sbatch", "--parsable", *args]), env=env, log=log, timeout=30,
            context=self.diagnostics,
        ).check(self.diagnostics)  # fmt: skip
        job = submitted.output.strip().splitlines()[-1].split(";")[0]
        deadline = time.monotonic() + timeout
        while True:
            shown = subprocess.run(
                self.client(["scontrol", "-o", "show", "job", job]), capture_output=True,
                text=True, timeout=30, check=False, env=env,
            )  # fmt: skip
            fields = dict(re.findall(r"(\w+)=(\S*)", shown.stdout))
            if fields.get("JobState") in _JOB_ENDED:
                exit_code, _, signum = fields.get("ExitCode", "1:0").partition(":")
                status = int(exit_code)
                if not status and int(signum or 0):
                    status = 128 + int(signum)  # killed by a signal, as a shell reports it
                if not status and fields["JobState"] != "COMPLETED":
                    status = 1  # cancelled, timed out, ...: never a success
                return Finished([*submitted.command, f"(job {job})"], status, submitted.output)
            if time.monotonic() > deadline:
                subprocess.run(
                    self.client(["scancel", job]), capture_output=True, timeout=30,
                    check=False, env=env,
                )  # fmt: skip
                pytest.fail(
                    f"job {job} still {fields.get('JobState')} after {timeout} s:\n"
                    f"{self.diagnostics()}"
                )
            time.sleep(0.2)

    def diagnostics(self) -> str:
        """The queue and the daemons' last log lines, for a failed launch's message."""
        queue = subprocess.run(
            self.client(["squeue", "--all", "-o", "%i %T %R %D %C %j"]), capture_output=True,
            text=True, timeout=30, check=False, env=self.env(self.folder),
        )  # fmt: skip
        parts = [f"squeue:\n{queue.stdout}{queue.stderr}"]
        for log in sorted(self.folder.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"{log.name}:\n" + "\n".join(tail))
        return "\n".join(parts)


#: the states a job leaves only by being purged (scontrol shows them until MinJobAge)
_JOB_ENDED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
     "DEADLINE", "PREEMPTED"}
)  # fmt: skip


def _cannot_run_slurm() -> str | None:
    installed = all(shutil.which(x) for x in ("slurmctld", "slurmd", "srun"))
    if not installed and os.geteuid() != 0:
        return "slurm-wlm is not installed, and installing it needs root (apt-get)"
    if os.geteuid() != 0:
        return "slurmd runs tasks as any user, so it needs root"
    return None


@contextlib.contextmanager
def slurm_cluster(folder: Path, hosts: Hosts | None = None) -> Iterator[SlurmCluster]:
    """scripts/slurm/up.sh in ``folder`` (one node on 127.0.0.1, or one node per namespace of
    ``hosts``); scripts/slurm/down.sh afterwards, whatever happened."""
    why = _cannot_run_slurm()
    if why is not None:
        pytest.skip(f"no SLURM cluster here: {why}")
    command = [str(REPO / "scripts" / "slurm" / "up.sh"), str(folder)]
    if hosts is not None:
        command += [f"{n}={a}" for n, a in zip(hosts.names, hosts.addresses)]
    cluster = SlurmCluster(folder, hosts)
    try:
        started = subprocess.run(
            command, capture_output=True, text=True, timeout=300, check=False,
            env=clean_env(folder),
        )  # fmt: skip
        assert started.returncode == 0, f"{command}:\n{started.stdout}\n{started.stderr}"
        yield cluster
    finally:
        subprocess.run(
            [str(REPO / "scripts" / "slurm" / "down.sh"), str(folder)],
            capture_output=True, timeout=60, check=False, env=clean_env(folder),
        )  # fmt: skip
