"""Distributed data parallel: one process per device, gradients all-reduced every step.

The user's process is rank 0 of its node; see :class:`ddpkit._runtime.launch.SubprocessLauncher` for
the exact child command and environment. Under torchrun or srun, nothing is launched: every rank
was started by them.

Keyword options go to :class:`torch.nn.parallel.DistributedDataParallel`
(``find_unused_parameters``, ``static_graph``, ``gradient_as_bucket_view`` and any other of its
keyword arguments). ``find_unused_parameters`` defaults to True, as ``DDPPlugin`` did in
Lightning 1.x (``strategy="ddp"`` builds one with False, 2.x's default).
``process_group_backend`` overrides the accelerator's default (gloo on CPU, nccl on GPU).

``timeout`` (a ``timedelta`` or seconds; default 30 minutes) is the stall timeout: when a rank has
waited that long in a collective (a backward all-reduce, a barrier, a metric sync) for a rank
that never arrived, every rank dumps the Python stack of each of its threads, the report names the
rank that never arrived, and every rank ends. The process group's own timeout is set 30 s longer,
as a backstop for collectives ddpkit does not see.

When every rank runs on this machine, nothing listens beyond loopback: the rendezvous store serves
on a socket the launcher bound to 127.0.0.1, and gloo's connections are made on the loopback
interface (unless ``GLOO_SOCKET_IFNAME`` says otherwise).
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import torch
import torch.distributed as dist

from ddpkit._runtime.ranks._names import ENV_JOB_KEY
from ddpkit._runtime.ranks._protocol import rank_stage
from ddpkit._runtime.ranks._rendezvous import Rendezvous, host_for
from ddpkit._runtime.ranks._stall import StallReport, StallWatchdog
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.environments._local import LocalEnvironment
from ddpkit.plugins.training_type._base import TrainingTypePlugin, check_flag
from ddpkit.plugins.training_type._ddp_options import (
    DEFAULT_TIMEOUT,
    check_ddp_kwargs,
    check_timeout,
    ddp_call,
    parse_backend_option,
)
from ddpkit.plugins.training_type._process_group import (
    COLLECTIVE_SLACK,
    agent_store,
    init_process_group,
    start_watchdog,
)
from ddpkit.plugins.training_type._unused import unused_parameters_error
from ddpkit.utilities._exchange import Exchanger
from ddpkit.utilities._seed import reset_seed

__all__ = ["DDPPlugin"]

#: what a DDPPlugin holds for one stage only, left out when it is pickled for spawned ranks
_STAGE_LOCAL = (
    "_rendezvous", "_on_stall", "_watchdog", "_job_stage", "_ddp_model", "_lightning_module"
)  # fmt: skip

_REDUCE_OPS = {"sum": "SUM", "mean": "SUM", "max": "MAX", "min": "MIN"}
#: the stages this process has joined (each stage's keys live under a prefix of its own)
_stage_numbers = itertools.count(1)


class DDPPlugin(TrainingTypePlugin):
    """DDP whose other ranks are **subprocesses that re-run the user's command line** (see the
    module docstring for the options, the stall timeout and what listens where)."""

    name: ClassVar[str] = "ddp"

    def __init__(
        self,
        parallel_devices: Sequence[torch.device | str] | None = None,
        num_nodes: int | None = None,
        cluster_environment: ClusterEnvironment | None = None,
        sync_batchnorm: bool | None = None,
        *,
        find_unused_parameters: bool = True,
        static_graph: bool = False,
        gradient_as_bucket_view: bool = False,
        timeout: datetime.timedelta | float | None = None,
        process_group_backend: str | None = None,
        **ddp_kwargs: Any,
    ) -> None:
        super().__init__(parallel_devices, num_nodes, cluster_environment, sync_batchnorm)
        call = ddp_call(
            type(self).__name__,
            {
                "find_unused_parameters": find_unused_parameters,
                "static_graph": static_graph,
                "gradient_as_bucket_view": gradient_as_bucket_view,
                "timeout": timeout,
                "process_group_backend": process_group_backend,
                **ddp_kwargs,
            },
        )
        self.find_unused_parameters = check_flag(
            call, "find_unused_parameters", find_unused_parameters
        )
        self.static_graph = check_flag(call, "static_graph", static_graph)
        self.gradient_as_bucket_view = check_flag(
            call, "gradient_as_bucket_view", gradient_as_bucket_view
        )
        self.timeout = check_timeout(call, timeout)
        self.process_group_backend = parse_backend_option(call, process_group_backend)
        self.ddp_kwargs = check_ddp_kwargs(call, ddp_kwargs)
        self._reset_run_state()

    def _reset_run_state(self) -> None:
        self._owns_process_group = False
        self._watchdog: StallWatchdog | None = None
        self._ddp_model: Callable[[], Any] | None = None  # weakly: names unused parameters
        self._stage = 0
        # Given by the launcher for the length of one stage (:meth:`joining`).
        self._rendezvous: Rendezvous | None = None
        self._on_stall: Callable[[StallReport], None] | None = None
        self._job_stage: int | None = None

    # -- ranks ----------------------------------------------------------------------------------

    @property
    def _env(self) -> ClusterEnvironment:
        return self._connected().cluster_environment

    @property
    def _ranks_from_environment(self) -> bool:
        """True when the launcher that started the ranks numbers them (torchrun, srun, a user's
        own environment); ddpkit's own ranks are numbered from the node and local rank."""
        return not isinstance(self._env, LocalEnvironment)

    @property
    def global_rank(self) -> int:
        if self._ranks_from_environment:
            return self._env.global_rank()
        return self.node_rank * self.num_processes + self.local_rank

    @property
    def world_size(self) -> int:
        if self._ranks_from_environment:
            return self._env.world_size()
        return self.num_processes * self.num_nodes

    @property
    def local_rank(self) -> int:
        return self._env.local_rank()

    @property
    def node_rank(self) -> int:
        return self._env.node_rank()

    @property
    def root_device(self) -> torch.device:
        devices = self.parallel_devices
        if not devices:
            return torch.device("cpu")
        return devices[min(self.local_rank, len(devices) - 1)]

    @property
    def backend(self) -> str:
        backend = self._connected().backend
        return backend or self.process_group_backend or self.accelerator.default_backend

    @property
    def all_ranks_local(self) -> bool:
        """True when every rank runs on this machine: the store then listens on loopback only."""
        return self.num_nodes == 1 and isinstance(self._env, LocalEnvironment)

    @property
    def stall_timeout(self) -> datetime.timedelta:
        return self.timeout or DEFAULT_TIMEOUT

    # -- one stage ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def joining(
        self,
        rendezvous: Rendezvous,
        on_stall: Callable[[StallReport], None] | None = None,
        stage: int | None = None,
    ) -> Iterator[None]:
        """The launcher's part of a stage: where the ranks meet, what rank 0's supervisor does
        on a stall (None: end the rank), and the stage's number in the job (None: this process
        counts its stages; a restarted job counts from 1 again, as its new children do)."""
        self._rendezvous, self._on_stall, self._job_stage = rendezvous, on_stall, stage
        try:
            yield
        finally:
            self._rendezvous, self._on_stall, self._job_stage = None, None, None

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        # The rank's side of the launcher protocol wraps the stage (a no-op outside ddpkit's
        # launchers): a stage that raises leaves its traceback for rank 0's supervisor.
        with rank_stage(), super().running():
            yield

    def setup_environment(self) -> None:
        # Lightning's DDP strategies, as each stage's ranks set up: every rank starts the stage
        # from seed_everything's seed, whatever the script drew before (a model's init, say).
        reset_seed()
        super().setup_environment()
        if dist.is_initialized():
            # The user (or their harness) made the group; use it and leave it to them.
            self._owns_process_group = False
            return
        self._stage = self._job_stage or next(_stage_numbers)
        env = self._env
        # Lightning 1.x told the environment its ranks here; a 1.x environment may rely on it.
        env.set_global_rank(self.global_rank)
        env.set_world_size(self.world_size)
        timeout = self.stall_timeout + COLLECTIVE_SLACK
        # torchrun: env:// also picks up the agent's own store (TORCHELASTIC_USE_AGENT_STORE).
        # env:// needs both variables; srun with only MASTER_PORT set builds its own store.
        env_init = self._ranks_from_environment and {"MASTER_ADDR", "MASTER_PORT"} <= env.env.keys()
        store, prefix = None, ""
        if env_init:
            store, prefix = agent_store(env.env, self.world_size, timeout, self._stage)
        else:
            rendezvous = self._rendezvous_of_stage()
            store = rendezvous.store(
                is_server=self.global_rank == 0, world_size=self.world_size, timeout=timeout
            )
            prefix = f"{rendezvous.prefix}stage{self._stage}/"
        init_process_group(
            self.backend,
            rank=self.global_rank,
            world_size=self.world_size,
            timeout=timeout,
            store=store,
            prefix=prefix,
            loopback=self.all_ranks_local,
        )
        self._owns_process_group = True
        self._watchdog = start_watchdog(
            rank=self.global_rank,
            world_size=self.world_size,
            timeout=self.stall_timeout,
            stage=self._stage,
            on_stall=self._on_stall,
        )

    def _rendezvous_of_stage(self) -> Rendezvous:
        if self._rendezvous is not None:
            return self._rendezvous  # a launcher of ddpkit's started this stage
        env = self._env
        address, port = env.main_address(), env.main_port()
        # A rank started by someone else: rank 0 serves the store on MASTER_PORT (srun's rank 0
        # binds it once for the life of the process); the others connect.
        host = host_for(port, local_only=self.all_ranks_local) if self.global_rank == 0 else None
        # A child of ddpkit's subprocess launcher got its job's key in its environment.
        return Rendezvous(address, port, host, key=env.env.get(ENV_JOB_KEY, ""))

    def collective(self, where: str) -> contextlib.AbstractContextManager[Any]:
        """Wrap one collective, so that the stall watchdog sees this rank waiting in it."""
        if self._watchdog is None:
            return contextlib.nullcontext()
        return self._watchdog.collective(where)

    # -- collectives ----------------------------------------------------------------------------
    # Each inside :meth:`collective` (so that the stall watchdog sees a rank waiting in it), each
    # a no-op without a process group. ``broadcast_object`` / ``all_gather_object`` are torch's
    # (pickles, for the user's own objects, as in Lightning); ``broadcast_json`` /
    # ``all_gather_bytes`` carry ddpkit's own exchanges as bytes in tensors
    # (:mod:`ddpkit.utilities._exchange`): no rank unpickles what another sent.

    def barrier(self, name: str | None = None) -> None:
        if dist.is_initialized():
            with self.collective(f"barrier({name})" if name else "barrier"):
                dist.barrier()

    def all_reduce(self, tensor: torch.Tensor, reduce_op: str = "mean") -> torch.Tensor:
        """``reduce_op`` ("sum", "mean", "max", "min") of ``tensor`` over every rank; a new
        tensor."""
        if not dist.is_initialized():
            return tensor
        world_size, device = self.world_size, self.root_device
        op = getattr(dist.ReduceOp, _REDUCE_OPS[reduce_op])
        out = tensor.detach().clone().to(device)
        # gloo has no AVG: sum, then divide.
        if reduce_op == "mean" and not out.is_floating_point():
            out = out.float()
        with self.collective("all_reduce"):
            dist.all_reduce(out, op=op)
        if reduce_op == "mean":
            out = out / world_size
        return out

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        if not dist.is_initialized():
            return obj
        box = [obj]
        with self.collective("broadcast_object"):
            dist.broadcast_object_list(box, src=src)
        return box[0]

    def all_gather_object(self, obj: Any) -> list[Any]:
        if not dist.is_initialized():
            return [obj]
        out: list[Any] = [None] * self.world_size
        with self.collective("all_gather_object"):
            dist.all_gather_object(out, obj)
        return out

    def broadcast_json(self, obj: Any, src: int = 0) -> Any:
        return self._exchanger.broadcast_json(obj, src)

    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        return self._exchanger.all_gather_bytes(data)

    @property
    def _exchanger(self) -> Exchanger:
        return Exchanger(lambda: self.root_device, self.collective)

    # -- the model ------------------------------------------------------------------------------

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.sync_batchnorm:
            model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        device_ids = [self.root_device.index] if self.root_device.type == "cuda" else None
        self._ddp_model = weakref.ref(ddp := torch.nn.parallel.DistributedDataParallel(
            model,
            device_ids=device_ids,
            find_unused_parameters=self.find_unused_parameters,
            static_graph=self.static_graph,
            gradient_as_bucket_view=self.gradient_as_bucket_view,
            **self.ddp_kwargs,
        ))  # fmt: skip
        return ddp

    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager[Any]:
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            return model.no_sync()
        return contextlib.nullcontext()

    def on_exception(self, exc: BaseException) -> BaseException | None:
        return unused_parameters_error(exc, self, self._ddp_model)

    def teardown(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()  # first: it talks to the store the process group holds
            self._watchdog = None
        if self._owns_process_group and dist.is_initialized():
            dist.destroy_process_group()
        self._owns_process_group = False
        if self._connection is not None:
            self._env.teardown()

    def finish_teardown(self) -> None:
        """Finish a teardown that an abort cut short; nothing when it ran through.

        The subprocess launcher unwinds rank 0's stage from its supervisor thread when a child
        dies, and that abort may land in the stage's own teardown (its collective failed first).
        Left there, the process group would outlive the stage, and a restart in this process
        would take it for the user's own and train on a group whose peer is dead."""
        if self._watchdog is not None or self._owns_process_group:
            self.teardown()

    def __getstate__(self) -> dict[str, Any]:
        # A stage's rendezvous (a socket) and supervisor hook stay with the launcher: the spawn
        # launcher gives each rank its own.
        return {**self.__dict__, **dict.fromkeys(_STAGE_LOCAL)}

    def __repr__(self) -> str:
        opts = [f"find_unused_parameters={self.find_unused_parameters}"]
        if self.static_graph:
            opts.append("static_graph=True")
        if self.timeout is not None:
            opts.append(f"timeout={self.timeout.total_seconds():g}")
        if self.process_group_backend is not None:
            opts.append(f"process_group_backend={self.process_group_backend!r}")
        return f"{type(self).__name__}({', '.join(opts)})"
