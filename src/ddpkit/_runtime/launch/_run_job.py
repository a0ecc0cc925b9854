"""``ddpkit run``: start N ranks of any script with torchrun's environment, under ddpkit's
supervision.

Each rank of node ``R`` (of ``M``, ``N`` per node) is started as::

    <sys.executable> -u -m ddpkit._runtime.ranks._run_rank [-m] script.py args...

with this process's environment plus torchrun's contract (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``GROUP_WORLD_SIZE``, ``ROLE_RANK``,
``ROLE_NAME``, ``ROLE_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, ``TORCHELASTIC_RUN_ID``,
``TORCHELASTIC_RESTART_COUNT``, ``TORCHELASTIC_MAX_RESTARTS``, ``TORCHELASTIC_USE_AGENT_STORE``,
``TORCHELASTIC_ERROR_FILE``, ``OMP_NUM_THREADS=1`` unless set, ...) and ddpkit's
(``DDPKIT_PARENT_PID``, ``DDPKIT_ERROR_FILE``, ``DDPKIT_RUN_STALL_TIMEOUT``). As under
torchrun, node 0's launcher serves the rendezvous store (``MASTER_PORT``, bound before any rank
starts) and every rank's ``env://`` joins it as a client;
a ddpkit Trainer in the script reads the same variables and plans ``launcher: external``.

The job ends as ddpkit's own launchers end theirs (:mod:`ddpkit._runtime.process`): the first rank
that fails is the root cause, every other rank is ended (SIGTERM, SIGKILL after 3 s), and the report
shows the root cause and its traceback first. Ranks die with this process (lifeline). A stall: every
rank dumps its stacks and the rank that never arrived is the root cause. ``max_restarts``: a failed
job starts again, whole, on a fresh store, with ``TORCHELASTIC_RESTART_COUNT`` one higher.
"""

from __future__ import annotations

import datetime
import functools
import os
import sys
import uuid
from dataclasses import dataclass

from ddpkit._runtime.process.context import ProcessContext
from ddpkit._runtime.process.files import JobFiles
from ddpkit._runtime.process.proc import start_rank
from ddpkit._runtime.process.signals import SignalFlag
from ddpkit._runtime.ranks._names import ENV_ERROR_FILE, ENV_FAULTHANDLER, ENV_PARENT_PID
from ddpkit._runtime.ranks._rendezvous import StoreHost
from ddpkit._runtime.ranks._run_rank import ENV_STALL_TIMEOUT
from ddpkit.errors import ChildFailedError

_WHAT = "ddpkit run"


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """What ``ddpkit run`` was asked for (the CLI checked the numbers)."""

    target: str
    args: tuple[str, ...] = ()
    module: bool = False
    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int = 0
    #: None: 127.0.0.1 on one node (the CLI requires it on several)
    master_addr: str | None = None
    #: None: a free port this process binds (the CLI requires it on several nodes)
    master_port: int | None = None
    max_restarts: int = 0
    stall_timeout: float = 1800.0

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes


def rank_command(spec: RunSpec) -> list[str]:
    """The command line of every rank (see the module docstring)."""
    target = ["-m", spec.target] if spec.module else [os.path.abspath(spec.target)]
    return [sys.executable, "-u", "-m", "ddpkit._runtime.ranks._run_rank", *target, *spec.args]


def run_env(
    spec: RunSpec, base: dict[str, str], *, local_rank: int, port: int, attempt: int, run_id: str
) -> dict[str, str]:
    """``base`` plus torchrun's variables for ``local_rank`` of this node and attempt (a pure
    dict: ddpkit's own variables are added by the job)."""
    rank = spec.node_rank * spec.nproc_per_node + local_rank
    env = dict(base)
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default too, for several ranks a node
    env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")  # as torchrun: nccl errors raise
    env.setdefault("TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    env.setdefault(ENV_FAULTHANDLER, "1")  # a crash in C++ shows the rank's Python stacks
    env.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(spec.world_size),
            "LOCAL_WORLD_SIZE": str(spec.nproc_per_node),
            "GROUP_RANK": str(spec.node_rank),
            "GROUP_WORLD_SIZE": str(spec.nnodes),
            "ROLE_RANK": str(rank),
            "ROLE_NAME": "default",
            "ROLE_WORLD_SIZE": str(spec.world_size),
            "MASTER_ADDR": spec.master_addr or "127.0.0.1",
            "MASTER_PORT": str(port),
            "TORCHELASTIC_RUN_ID": run_id,
            "TORCHELASTIC_RESTART_COUNT": str(attempt),
            "TORCHELASTIC_MAX_RESTARTS": str(spec.max_restarts),
            "TORCHELASTIC_USE_AGENT_STORE": "True",
        }
    )
    return env


class RunJob:
    """One start of the job: its store, its ranks (a process context), their end."""

    def __init__(self, spec: RunSpec, attempt: int, run_id: str) -> None:
        self.spec = spec
        self.attempt = attempt
        self.run_id = run_id
        self.host: StoreHost | None = None
        self.store: object = None
        self.files = JobFiles()
        if spec.node_rank == 0:
            # Bound before any rank starts: the port is never free in between.
            self.host = StoreHost.bind(spec.master_port, local_only=spec.nnodes == 1)
            self.port = self.host.port
        else:
            self.port = int(spec.master_port or 0)
        self.context = ProcessContext(_WHAT, self.files.record_of)

    def start(self) -> None:
        spec, command, base = self.spec, rank_command(self.spec), dict(os.environ)
        starters, fix = [], f"check that {sys.executable} runs."
        for local_rank in range(spec.nproc_per_node):
            env = run_env(spec, base, local_rank=local_rank, port=self.port,
                          attempt=self.attempt, run_id=self.run_id)  # fmt: skip
            rank = int(env["RANK"])
            env[ENV_PARENT_PID] = str(os.getpid())
            env[ENV_ERROR_FILE] = str(self.files.error_file(rank))
            # Where torch's @record writes, as under torchrun (ddpkit's own report needs none).
            env["TORCHELASTIC_ERROR_FILE"] = str(self.files.path / f"rank{rank}.torchelastic.json")
            env[ENV_STALL_TIMEOUT] = f"{spec.stall_timeout:g}"
            cannot = f"ddpkit run: could not start rank {rank}"
            starters.append((rank, functools.partial(start_rank, command, env, cannot, fix)))
        self.context.start(starters)
        if self.host is not None:
            # The store's server, on the socket bound above; torch is imported here, while
            # the ranks import theirs (they retry connecting until it serves).
            timeout = datetime.timedelta(seconds=max(60.0, spec.stall_timeout + 30))
            self.store = self.host.server(self.spec.master_addr or "127.0.0.1",
                                          spec.world_size, timeout)  # fmt: skip

    def close(self) -> None:
        self.store = None  # the server stops with its last reference
        if self.host is not None:
            self.host.close()
            self.host = None
        self.files.close()


def run(spec: RunSpec) -> int:
    """Run the job (restarting it up to ``spec.max_restarts`` times); the exit status."""
    run_id = uuid.uuid4().hex[:12]
    signals = SignalFlag()
    try:
        with signals:
            for attempt in range(spec.max_restarts + 1):
                job = RunJob(spec, attempt, run_id)
                try:
                    job.start()
                    error = job.context.wait(signals)
                finally:
                    job.close()
                if error is None:
                    return 0
                if not isinstance(error, ChildFailedError):
                    raise error  # an interrupt: KeyboardInterrupt / SystemExit(128 + signal)
                left = spec.max_restarts - attempt
                _say(str(error))
                if left == 0:
                    return 1
                _say(f"ddpkit run: restarting the job ({left} restart(s) left): attempt "
                     f"{attempt + 1} gets TORCHELASTIC_RESTART_COUNT={attempt + 1}.")  # fmt: skip
    finally:
        signals.close()
    return 1


def _say(text: str) -> None:
    sys.stderr.write(f"{text}\n")
    sys.stderr.flush()


def interrupted_status(exc: BaseException) -> int:
    """The exit status of an interrupted run: 130 after SIGINT, 143 after SIGTERM."""
    if isinstance(exc, KeyboardInterrupt):
        return 130
    code = exc.code if isinstance(exc, SystemExit) else 1
    return code if isinstance(code, int) else 1
