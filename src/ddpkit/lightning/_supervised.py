"""``SupervisedDDPStrategy``: Lightning's DDP, with ranks ddpkit starts, connects and supervises.

Everything that trains is Lightning's (``DDPStrategy``: the DDP wrapper, the hooks, the loop);
ddpkit adds what Lightning's own ``ddp`` / ``ddp_spawn`` lack (docs/reliability.md):

- the ranks are started by ddpkit's launchers (:mod:`ddpkit.lightning._launchers`): when one rank
  raises or is killed, every rank is ended at once and the error names the root cause with its
  traceback; no rank outlives the job, and the children end when the launching process dies;
- the process group meets on the store socket the launcher bound before any rank started (a busy
  ``MASTER_PORT`` fails before there is a rank to orphan), on loopback only when every rank is on
  this machine;
- a stall watchdog: a rank that waits in a collective (backward's all-reduce, a barrier, a
  ``sync_dist`` reduction, a broadcast) longer than ``timeout`` raises the alarm, every rank
  prints its stacks, and the report names the rank that never arrived.

Two ways to it: ``ddpkit.lightning.Trainer(..., supervise=True)`` with any device flags ddpkit's
connector resolves (1.x or 2.x), or ``strategy=SupervisedDDPStrategy(...)`` with Lightning 2.x's
own device flags, in ``ddpkit.lightning.Trainer`` or ``pytorch_lightning.Trainer`` alike.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import warnings
from collections.abc import Iterator
from typing import Any

import pytorch_lightning as pl
from lightning_fabric.plugins.environments.lightning import LightningEnvironment
from lightning_fabric.utilities.seed import reset_seed
from pytorch_lightning.strategies import DDPStrategy

from ddpkit._runtime.launch import Launcher
from ddpkit._runtime.ranks._names import ENV_PARENT_PID
from ddpkit._runtime.restart.checks import check_max_restarts
from ddpkit.connector import AcceleratorConnector, Built, Flags
from ddpkit.errors import DDPKitWarning, MisconfigurationError
from ddpkit.lightning._environments import from_lightning
from ddpkit.lightning._launchers import (
    RankLauncher,
    SupervisedSpawnLauncher,
    SupervisedSubprocessLauncher,
)
from ddpkit.plugins import DDPPlugin, DDPSpawnPlugin

#: popen: DDPPlugin (the other ranks re-run the script); the others: DDPSpawnPlugin's
_START_METHODS = ("popen", "spawn", "fork", "forkserver")


class SupervisedDDPStrategy(DDPStrategy):
    """Lightning's ``DDPStrategy`` whose ranks ddpkit starts and supervises (see the module).

    ``start_method``: ``"popen"`` (the other ranks re-run the script, ddpkit's ``DDPPlugin``) or
    ``"spawn"`` / ``"fork"`` / ``"forkserver"`` (``DDPSpawnPlugin``). ``timeout`` (seconds or a
    ``timedelta``; default 30 minutes) is ddpkit's stall timeout; the process group's own timeout
    is 30 s longer, as a backstop. ``max_restarts``: a fit whose rank fails starts again on new
    ranks, from the newest complete checkpoint, up to that many times (docs/reliability.md).
    Every other keyword goes to ``DDPStrategy`` and from there to ``DistributedDataParallel``
    (``find_unused_parameters``, ``static_graph``, ...).
    """

    def __init__(
        self,
        start_method: str = "popen",
        timeout: datetime.timedelta | float | None = None,
        process_group_backend: str | None = None,
        max_restarts: int = 0,
        **kwargs: Any,
    ) -> None:
        if start_method not in _START_METHODS:
            raise MisconfigurationError(
                f"SupervisedDDPStrategy(start_method={start_method!r}): ddpkit starts ranks with "
                f"{', '.join(repr(m) for m in _START_METHODS)}. Fix: start_method='popen' (the "
                f"other ranks re-run the script) or 'spawn'."
            )
        super().__init__(
            start_method=start_method,  # type: ignore[arg-type]
            process_group_backend=process_group_backend,
            **kwargs,
        )
        self.max_restarts = check_max_restarts("SupervisedDDPStrategy", max_restarts)
        self._stall_timeout = timeout
        self._ddpkit: DDPPlugin | None = None
        self._ddpkit_launcher: Launcher | None = None

    @classmethod
    def from_built(
        cls, built: Built, start_method: str, options: dict[str, Any]
    ) -> SupervisedDDPStrategy:
        """The strategy for a plan the connector already resolved (``Trainer(supervise=True)``)."""
        plugin = built.training_type
        if not isinstance(plugin, DDPPlugin):
            raise TypeError(f"a DDP plan has a DDP plugin, not {plugin!r}")
        ddp = {k: v for k, v in options.items() if k not in ("timeout", "process_group_backend")}
        strategy = cls(start_method, plugin.timeout, options.get("process_group_backend"), **ddp)
        strategy._ddpkit, strategy._ddpkit_launcher = plugin, built.launcher
        return strategy

    # -- resolved once Lightning has set the devices, the nodes and the environment -----------

    def _resolve(self) -> None:
        """With Lightning's own device flags: ddpkit's connector resolves the same request."""
        devices = self.parallel_devices or []
        on_gpu = bool(devices) and devices[0].type == "cuda"
        options = dict(self._ddp_kwargs)
        plugin_type = DDPPlugin if self._start_method == "popen" else DDPSpawnPlugin
        if plugin_type is DDPSpawnPlugin:
            options["start_method"] = self._start_method
        plugin = plugin_type(
            timeout=self._stall_timeout,
            process_group_backend=self._process_group_backend,
            **options,
        )
        environment = self.cluster_environment
        mine = (
            []
            if environment is None or type(environment) is LightningEnvironment
            else [environment]
        )
        flags = Flags.of(
            accelerator="gpu" if on_gpu else "cpu",
            devices=[d.index or 0 for d in devices] if on_gpu else len(devices),
            num_nodes=self.num_nodes,
            strategy=plugin,
            plugins=[from_lightning(e) for e in mine],
        )
        with warnings.catch_warnings():
            # The user wrote Lightning's spelling: ddpkit's wording of it is no news to them.
            warnings.simplefilter("ignore", DDPKitWarning)
            connector = AcceleratorConnector(flags)
        built = connector.built.training_type
        if not isinstance(built, DDPPlugin):
            raise TypeError(f"a DDP request built {built!r}")
        self._ddpkit, self._ddpkit_launcher = built, connector.built.launcher

    def _configure_launcher(self) -> None:
        if self._ddpkit is None:
            self._resolve()
        launcher = self._ddpkit_launcher
        if launcher is None:  # this rank was started by ddpkit's launcher, torchrun or srun
            self._launcher = RankLauncher()
        elif self._start_method == "popen":
            self._launcher = SupervisedSubprocessLauncher(launcher)
        else:
            self._launcher = SupervisedSpawnLauncher(self, launcher, self._start_method)

    @property
    def ddpkit_plugin(self) -> DDPPlugin:
        """ddpkit's training type that connects this rank (its store, its stall watchdog)."""
        if self._ddpkit is None:
            raise RuntimeError("SupervisedDDPStrategy is used before Lightning set it up")
        return self._ddpkit

    # -- per rank -----------------------------------------------------------------------------

    def setup_distributed(self) -> None:
        """The process group, made by ddpkit on the store its launcher bound (instead of
        Lightning's ``MASTER_PORT`` rendezvous), with the stall watchdog running."""
        reset_seed()
        self.set_world_ranks()
        self._process_group_backend = self.ddpkit_plugin.backend
        self.ddpkit_plugin.setup_environment()

    def _end_on_sigterm(self) -> None:
        """In a rank ddpkit started, SIGTERM ends the rank, as ddpkit's supervisor means it to.

        Lightning's own SIGTERM handler (registered when the stage starts) only notes the signal
        and broadcasts it at the next batch: a rank waiting in a collective for a rank that died
        would never get there, and the supervisor would have to wait out its grace period before
        SIGKILL. The user's own process (rank 0 of the subprocess launcher) keeps Lightning's
        handler, which then calls ddpkit's."""
        if ENV_PARENT_PID in os.environ:  # the launcher's mark on the ranks it started
            with contextlib.suppress(ValueError):  # not the main thread: signals are not ours
                signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def on_train_start(self) -> None:
        self._end_on_sigterm()
        super().on_train_start()

    def on_validation_start(self) -> None:
        self._end_on_sigterm()
        super().on_validation_start()

    def on_test_start(self) -> None:
        self._end_on_sigterm()
        super().on_test_start()

    def on_predict_start(self) -> None:
        self._end_on_sigterm()
        super().on_predict_start()

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            if self._ddpkit is not None:
                self._ddpkit.teardown()  # stops the watchdog, destroys the group it made

    @contextlib.contextmanager
    def _collective(self, where: str) -> Iterator[None]:
        plugin = self._ddpkit
        with plugin.collective(where) if plugin is not None else contextlib.nullcontext():
            yield

    def setup(self, trainer: pl.Trainer) -> None:
        with self._collective("setup"):  # DDP's first broadcast of the weights
            super().setup(trainer)

    def backward(self, closure_loss: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        with self._collective("backward"):
            return super().backward(closure_loss, optimizer, *args, **kwargs)

    def barrier(self, *args: Any, **kwargs: Any) -> None:
        name = args[0] if args else kwargs.get("name")
        with self._collective(f"barrier({name})" if name else "barrier"):
            super().barrier(*args, **kwargs)

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        with self._collective("broadcast"):
            return super().broadcast(obj, src)

    def reduce(self, tensor: Any, group: Any = None, reduce_op: Any = "mean") -> Any:
        with self._collective("reduce"):
            return super().reduce(tensor, group=group, reduce_op=reduce_op)

    def all_gather(self, tensor: Any, group: Any = None, sync_grads: bool = False) -> Any:
        with self._collective("all_gather"):
            return super().all_gather(tensor, group=group, sync_grads=sync_grads)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(start_method={self._start_method!r})"
