"""Distributed data parallel: one process per device, gradients all-reduced every step."""

from __future__ import annotations

import contextlib
import datetime
import itertools
import os
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.distributed as dist

from ddpkit.accelerators.base import Accelerator
from ddpkit.plugins.environments.base import ClusterEnvironment
from ddpkit.plugins.environments.local import LocalEnvironment
from ddpkit.plugins.precision.base import PrecisionPlugin
from ddpkit.plugins.training_type.base import TrainingTypePlugin
from ddpkit.utilities.ports import listen_for_store

#: the stages this process has joined (each stage's keys live under a prefix of its own)
_stage_numbers = itertools.count(1)

if TYPE_CHECKING:
    from ddpkit.launchers.stall import StallReport, StallWatchdog

__all__ = ["DDPPlugin"]

_REDUCE_OPS = {"sum": "SUM", "mean": "SUM", "max": "MAX", "min": "MIN"}
#: the stall timeout when the user sets none (torch's own process-group default)
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
#: a collective waits this much longer than the stall timeout: the stall watchdog, which dumps
#: every rank's stack and names the rank that never arrived, always acts first
COLLECTIVE_SLACK = datetime.timedelta(seconds=30)


class DDPPlugin(TrainingTypePlugin):
    """DDP whose other ranks are **subprocesses that re-run the user's command line**.

    The user's process is rank 0 of its node; see :class:`ddpkit.launchers.SubprocessLauncher`
    for the exact child command and environment. Under torchrun or srun, nothing is launched:
    every rank was started by them.

    Keyword options go to :class:`torch.nn.parallel.DistributedDataParallel`
    (``find_unused_parameters``, ``static_graph``, ``gradient_as_bucket_view`` and any other of
    its keyword arguments). ``process_group_backend`` overrides the accelerator's default (gloo on
    CPU, nccl on GPU).

    ``timeout`` (a ``timedelta`` or seconds; default 30 minutes) is the stall timeout: when a
    rank has waited that long in a collective (a backward all-reduce, a barrier, a metric sync)
    for a rank that never arrived, every rank dumps the Python stack of each of its threads, the
    report names the rank that never arrived, and every rank ends. The process group's own
    timeout is set 30 s longer, as a backstop for collectives ddpkit does not see.

    When every rank runs on this machine, nothing listens beyond loopback: the rendezvous store
    serves on a socket the launcher bound to 127.0.0.1, and gloo's connections are made on the
    loopback interface (unless ``GLOO_SOCKET_IFNAME`` says otherwise).
    """

    name: ClassVar[str] = "ddp"
    launcher_name: ClassVar[str] = "subprocess"

    def __init__(
        self,
        parallel_devices: list[torch.device] | None = None,
        num_nodes: int | None = None,
        cluster_environment: ClusterEnvironment | None = None,
        sync_batchnorm: bool | None = None,
        *,
        find_unused_parameters: bool = False,
        static_graph: bool = False,
        gradient_as_bucket_view: bool = False,
        timeout: datetime.timedelta | float | None = None,
        process_group_backend: str | None = None,
        **ddp_kwargs: Any,
    ) -> None:
        super().__init__(parallel_devices, num_nodes, cluster_environment, sync_batchnorm)
        self.find_unused_parameters = find_unused_parameters
        self.static_graph = static_graph
        self.gradient_as_bucket_view = gradient_as_bucket_view
        if timeout is not None and not isinstance(timeout, datetime.timedelta):
            timeout = datetime.timedelta(seconds=float(timeout))
        self.timeout: datetime.timedelta | None = timeout
        self.process_group_backend = process_group_backend
        self.ddp_kwargs = ddp_kwargs
        self._owns_process_group = False
        # The listening socket of the rendezvous store, handed over by the launcher to rank 0
        # so that the port is never free between choosing and binding it. The launcher owns
        # it (it outlives each stage); the store gets a duplicate of its descriptor.
        self.store_socket: socket.socket | None = None
        # The store's server (rank 0), one per listening socket for the life of the process:
        # every stage joins it under a prefix of its own. A server per stage would share the
        # socket with the previous stage's server, which lives as long as that stage's process
        # group does (the DDP module holds it, until the garbage collector runs) and would take
        # some of the connections, stale keys and all.
        self.store_server: Any = None
        #: what rank zero of the subprocess launcher does on a stall (None: end the rank)
        self.stall_handler: Callable[[StallReport], None] | None = None
        self._watchdog: StallWatchdog | None = None
        self._stage = 0

    def connect(
        self,
        *,
        accelerator: Accelerator,
        precision_plugin: PrecisionPlugin,
        cluster_environment: ClusterEnvironment,
        parallel_devices: list[torch.device],
        num_nodes: int,
        sync_batchnorm: bool,
    ) -> list[str]:
        notes = super().connect(
            accelerator=accelerator,
            precision_plugin=precision_plugin,
            cluster_environment=cluster_environment,
            parallel_devices=parallel_devices,
            num_nodes=num_nodes,
            sync_batchnorm=sync_batchnorm,
        )
        env = self.cluster_environment
        if isinstance(env, LocalEnvironment):
            env.configure(processes_per_node=self.num_processes, num_nodes=self.num_nodes)
        return notes

    @property
    def _env(self) -> ClusterEnvironment:
        env = self.cluster_environment
        if env is None:
            raise RuntimeError(f"{type(self).__name__} is used before a Trainer connected it")
        return env

    @property
    def global_rank(self) -> int:
        return self._env.global_rank()

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
        return self.process_group_backend or self.accelerator.default_backend

    @property
    def all_ranks_local(self) -> bool:
        """True when every rank runs on this machine: the store then listens on loopback only."""
        return self.num_nodes == 1 and isinstance(self._env, LocalEnvironment)

    # -- runtime ------------------------------------------------------------------------------

    @property
    def stall_timeout(self) -> datetime.timedelta:
        return self.timeout or DEFAULT_TIMEOUT

    def setup_environment(self) -> None:
        super().setup_environment()
        if dist.is_initialized():
            # The user (or their harness) made the group; use it and leave it to them.
            self._owns_process_group = False
            return
        self._stage = next(_stage_numbers)
        with _gloo_on_loopback(self.all_ranks_local and self.backend == "gloo"):
            self._init_process_group()
        self._owns_process_group = True
        self._start_watchdog()

    def _init_process_group(self) -> None:
        kwargs: dict[str, Any] = {"timeout": self.stall_timeout + COLLECTIVE_SLACK}
        external = self._env.creates_processes_externally
        if external and {"MASTER_ADDR", "MASTER_PORT"} <= self._env.env.keys():
            # torchrun: env:// also picks up the agent's own store (TORCHELASTIC_USE_AGENT_STORE).
            # env:// needs both variables; srun with only MASTER_PORT set builds its own store.
            dist.init_process_group(
                self.backend, rank=self.global_rank, world_size=self.world_size, **kwargs
            )
        else:
            store = self._make_store()
            dist.init_process_group(
                self.backend,
                store=store,
                rank=self.global_rank,
                world_size=self.world_size,
                **kwargs,
            )

    def _start_watchdog(self) -> None:
        if self.world_size < 2:
            return
        from ddpkit.launchers.stall import StallWatchdog

        # The process group's own store connection, already made: a new one could reach rank
        # 0 after its store has gone (a stage without collectives ends at once there) and wait
        # out the store timeout. TCPStore serializes its operations, so a thread may share it.
        store = dist.distributed_c10d._get_default_store()
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        self._watchdog = StallWatchdog(
            rank=self.global_rank,
            world_size=self.world_size,
            timeout=self.stall_timeout.total_seconds(),
            store=lambda: store,
            prefix=f"ddpkit/stall/{restart}/{self._stage}/",
            on_stall=self.stall_handler,
        )
        self._watchdog.start()

    def collective(self, where: str) -> contextlib.AbstractContextManager[Any]:
        """Wrap one collective, so that the stall watchdog sees this rank waiting in it."""
        if self._watchdog is None:
            return contextlib.nullcontext()
        return self._watchdog.collective(where)

    def _make_store(self) -> Any:
        env = self._env
        timeout = self.stall_timeout + COLLECTIVE_SLACK
        address, port = env.main_address(), env.main_port()
        if self.global_rank == 0:
            if self.store_server is None:
                if self.store_socket is None:  # no launcher of ddpkit's bound one (srun)
                    self.store_socket = listen_for_store(port, local_only=self.all_ranks_local)
                self.store_server = dist.TCPStore(  # type: ignore[attr-defined]
                    address,
                    port,
                    self.world_size,
                    True,
                    timeout,
                    wait_for_workers=False,
                    master_listen_fd=os.dup(self.store_socket.fileno()),  # the store closes it
                )
            store = self.store_server
        else:
            store = dist.TCPStore(  # type: ignore[attr-defined]
                address, port, self.world_size, False, timeout, wait_for_workers=False
            )
        return dist.PrefixStore(f"ddpkit/stage{self._stage}/", store)  # type: ignore[attr-defined]

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.sync_batchnorm:
            model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        device_ids = [self.root_device.index] if self.root_device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(
            model,
            device_ids=device_ids,
            find_unused_parameters=self.find_unused_parameters,
            static_graph=self.static_graph,
            gradient_as_bucket_view=self.gradient_as_bucket_view,
            **self.ddp_kwargs,
        )

    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager[Any]:
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            return model.no_sync()
        return contextlib.nullcontext()

    def barrier(self, name: str | None = None) -> None:
        if dist.is_initialized():
            with self.collective(f"barrier({name})" if name else "barrier"):
                dist.barrier()

    def all_reduce(self, tensor: torch.Tensor, reduce_op: str = "mean") -> torch.Tensor:
        if not dist.is_initialized():
            return tensor
        op = getattr(dist.ReduceOp, _REDUCE_OPS[reduce_op])
        out = tensor.detach().clone().to(self.root_device)
        # gloo has no AVG: sum, then divide.
        if reduce_op == "mean" and not out.is_floating_point():
            out = out.float()
        with self.collective("all_reduce"):
            dist.all_reduce(out, op=op)
        if reduce_op == "mean":
            out = out / self.world_size
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

    def teardown(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()  # first: it talks to the store the process group holds
            self._watchdog = None
        if self._owns_process_group and dist.is_initialized():
            dist.destroy_process_group()
        self._owns_process_group = False

    def __getstate__(self) -> dict[str, Any]:
        # A socket does not pickle; the spawn launcher hands rank 0 its own.
        state = self.__dict__.copy()
        state["store_socket"] = None
        state["store_server"] = None
        state["stall_handler"] = None
        state["_watchdog"] = None
        return state

    def __repr__(self) -> str:
        opts = [f"find_unused_parameters={self.find_unused_parameters}"]
        if self.static_graph:
            opts.append("static_graph=True")
        if self.timeout is not None:
            opts.append(f"timeout={self.timeout.total_seconds():g}")
        return f"{type(self).__name__}({', '.join(opts)})"


@contextlib.contextmanager
def _gloo_on_loopback(enabled: bool) -> Iterator[None]:
    """While the process group is made: gloo's listening sockets on the loopback interface.

    gloo otherwise listens on the address the host name resolves to, often the machine's LAN
    address, with no authentication. It reads ``GLOO_SOCKET_IFNAME`` when the group is created,
    so the variable is set for that moment only and the user's environment is left as it was.
    A value the user set wins.
    """
    loopback = _loopback_interface() if enabled else None
    if loopback is None or "GLOO_SOCKET_IFNAME" in os.environ:
        yield
        return
    os.environ["GLOO_SOCKET_IFNAME"] = loopback
    try:
        yield
    finally:
        del os.environ["GLOO_SOCKET_IFNAME"]


def _loopback_interface() -> str | None:
    try:
        names = {name for _, name in socket.if_nameindex()}
    except OSError:
        return None
    return next((name for name in ("lo", "lo0") if name in names), None)
