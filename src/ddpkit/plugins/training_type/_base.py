"""What every training type does: where the model lives and how ranks cooperate.

A training type holds two things apart: what the user passed to its constructor
(:attr:`TrainingTypePlugin.given`, read by the connector when it resolves the flags, never
changed) and what the connector decided (one frozen :class:`Connection`, set once by
:meth:`TrainingTypePlugin.connect`). An instance serves one Trainer; a second Trainer given the
same instance gets a copy (:meth:`TrainingTypePlugin.unconnected_copy`), so neither sees the
other's decisions.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import torch

from ddpkit.accelerators._base import Accelerator, LoaderHooks
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.utilities._exchange import json_round_trip

P = TypeVar("P", bound="TrainingTypePlugin")


@dataclass(frozen=True)
class Given:
    """The fields a user may set on a training type; None = left to the connector."""

    parallel_devices: tuple[torch.device, ...] | None = None
    num_nodes: int | None = None
    cluster_environment: ClusterEnvironment | None = None
    sync_batchnorm: bool | None = None


@dataclass(frozen=True)
class Connection:
    """What the connector decided for a training type, every field complete (it equals the
    plan: ``ddpkit explain`` shows the same values)."""

    accelerator: Accelerator
    precision_plugin: PrecisionPlugin
    cluster_environment: ClusterEnvironment
    parallel_devices: tuple[torch.device, ...]
    num_nodes: int
    sync_batchnorm: bool
    #: the process-group backend ("gloo", "nccl", ...); None for a single process
    backend: str | None = None


def plugin_call(name: str, args: dict[str, Any]) -> str:
    """``DDPPlugin(num_nodes=-1)``: a constructor call as the user wrote it, for messages."""
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"{name}({shown})"


def _devices(call: str, value: Any) -> tuple[torch.device, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | torch.device) or not isinstance(value, Sequence):
        raise MisconfigurationError(
            f"{call}: parallel_devices must be a list of devices, e.g. "
            f"[torch.device('cpu')] * 2 or [torch.device('cuda', 0)]. Fix: pass a list."
        )
    try:
        devices = tuple(torch.device(d) for d in value)
    except (RuntimeError, TypeError, ValueError) as err:
        raise MisconfigurationError(
            f"{call}: parallel_devices holds something that is not a device ({err}). Fix: pass "
            f"torch.device objects or names such as 'cpu' and 'cuda:0'."
        ) from None
    if not devices:
        raise MisconfigurationError(
            f"{call}: parallel_devices is empty. Fix: pass at least one device, or leave it "
            f"unset and the Trainer's devices= decides."
        )
    kinds = {d.type for d in devices}
    if len(kinds) > 1 or not kinds <= {"cpu", "cuda"}:
        raise MisconfigurationError(
            f"{call}: parallel_devices mixes or names device types {sorted(kinds)}; ddpkit runs "
            f"on all-CPU or all-CUDA devices. Fix: pass one kind, 'cpu' or 'cuda'."
        )
    return devices


def _num_nodes(call: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MisconfigurationError(
            f"{call}: num_nodes must be an int ≥ 1, got {value!r}. Fix: num_nodes=1 on one "
            f"machine, or the number of machines."
        )
    return value


def _environment(call: str, value: Any) -> ClusterEnvironment | None:
    if value is None or isinstance(value, ClusterEnvironment):
        return value
    raise MisconfigurationError(
        f"{call}: cluster_environment must be a ClusterEnvironment (LocalEnvironment, "
        f"TorchElasticEnvironment, SLURMEnvironment or a subclass), not {type(value).__name__}. "
        f"Fix: pass one of those, or leave it unset and the connector chooses."
    )


def check_flag(call: str, name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise MisconfigurationError(
        f"{call}: {name} must be True or False, got {value!r}. Fix: {name}=True."
    )


class TrainingTypePlugin(LoaderHooks):
    """How ranks cooperate. See the module docstring for the given / connected split.

    A subclass of :class:`SingleDevicePlugin`, :class:`DDPPlugin` or :class:`DDPSpawnPlugin`
    is launched like its parent. A direct subclass of this class trains in the user's process
    only (world size 1); it must implement :attr:`root_device`.
    """

    #: the kind of training type: "single_device", "ddp", "ddp_spawn", or "custom" (one process)
    name: ClassVar[str] = "custom"

    def __init__(
        self,
        parallel_devices: Sequence[torch.device | str] | None = None,
        num_nodes: int | None = None,
        cluster_environment: ClusterEnvironment | None = None,
        sync_batchnorm: bool | None = None,
    ) -> None:
        given = dict(
            parallel_devices=parallel_devices,
            num_nodes=num_nodes,
            cluster_environment=cluster_environment,
            sync_batchnorm=sync_batchnorm,
        )
        call = plugin_call(type(self).__name__, {k: v for k, v in given.items() if v is not None})
        self._given = Given(
            parallel_devices=_devices(call, parallel_devices),
            num_nodes=_num_nodes(call, num_nodes),
            cluster_environment=_environment(call, cluster_environment),
            sync_batchnorm=None
            if sync_batchnorm is None
            else check_flag(call, "sync_batchnorm", sync_batchnorm),
        )
        self._connection: Connection | None = None

    # -- what the user gave, what the connector decided -------------------------------------------

    @property
    def given(self) -> Given:
        """The fields the user passed to the constructor (None: left to the connector)."""
        return self._given

    @property
    def is_connected(self) -> bool:
        """True once a Trainer's connector has connected this instance."""
        return self._connection is not None

    def connect(self, connection: Connection) -> None:
        """Called once by the connector (:func:`ddpkit.connector._build`) with its decisions."""
        if self._connection is not None:
            raise RuntimeError(
                f"{type(self).__name__} is connected already; the connector connects a copy"
            )
        self._connection = connection

    def unconnected_copy(self: P) -> P:
        """A copy with the user's fields and none of a Trainer's decisions or run state."""
        clone = copy.copy(self)
        clone._connection = None
        clone._reset_run_state()
        return clone

    def _reset_run_state(self) -> None:
        """Subclasses: forget what a run left behind (process groups, watchdogs)."""

    def _connected(self) -> Connection:
        if self._connection is None:
            raise RuntimeError(f"{type(self).__name__} is used before a Trainer connected it")
        return self._connection

    @property
    def accelerator(self) -> Accelerator:
        return self._connected().accelerator

    @property
    def precision_plugin(self) -> PrecisionPlugin:
        return self._connected().precision_plugin

    @property
    def cluster_environment(self) -> ClusterEnvironment | None:
        if self._connection is not None:
            return self._connection.cluster_environment
        return self._given.cluster_environment

    @property
    def parallel_devices(self) -> list[torch.device]:
        if self._connection is not None:
            return list(self._connection.parallel_devices)
        return list(self._given.parallel_devices or ())

    @property
    def num_nodes(self) -> int:
        if self._connection is not None:
            return self._connection.num_nodes
        return self._given.num_nodes or 1

    @property
    def sync_batchnorm(self) -> bool:
        if self._connection is not None:
            return self._connection.sync_batchnorm
        return bool(self._given.sync_batchnorm)

    @property
    def num_processes(self) -> int:
        """Processes per node."""
        return len(self.parallel_devices) or 1

    @property
    def world_size(self) -> int:
        return self.num_processes * self.num_nodes

    @property
    def global_rank(self) -> int:
        return 0

    @property
    def local_rank(self) -> int:
        return 0

    @property
    def node_rank(self) -> int:
        return 0

    @property
    def is_global_zero(self) -> bool:
        return self.global_rank == 0

    @property
    def root_device(self) -> torch.device:
        """The device of this rank."""
        devices = self.parallel_devices
        return devices[0] if devices else torch.device("cpu")

    # -- runtime ------------------------------------------------------------------------------

    def setup_environment(self) -> None:
        """Per-rank set-up: the device, and the process group for distributed types."""
        self.accelerator.setup_process(self.root_device, self.num_processes)

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager[Any]:
        """Skip the gradient all-reduce (gradient accumulation steps)."""
        return contextlib.nullcontext()

    def collective(self, where: str) -> contextlib.AbstractContextManager[Any]:
        """Wrap one collective (``where`` names it), so a stall watchdog sees the rank in it."""
        return contextlib.nullcontext()

    def barrier(self, name: str | None = None) -> None:
        pass

    def all_reduce(self, tensor: torch.Tensor, reduce_op: str = "mean") -> torch.Tensor:
        return tensor

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        return obj

    def all_gather_object(self, obj: Any) -> list[Any]:
        return [obj]

    @property
    def setup_optimizers_in_pre_dispatch(self) -> bool:
        """Lightning 1.x: True creates the optimizers after the model is wrapped (and after
        ``on_fit_start``), for a training type that needs the wrapped model's parameters."""
        return False

    def broadcast_json(self, obj: Any, src: int = 0) -> Any:
        """``obj`` (JSON-able) of rank ``src`` on every rank, as JSON in a tensor: ddpkit's own
        exchanges never unpickle what another rank sent (:mod:`ddpkit.utilities._exchange`)."""
        return json_round_trip(obj)

    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        """Every rank's ``data``, in rank order (bytes in a tensor, never a pickle)."""
        return [data]

    def on_exception(self, exc: BaseException) -> BaseException | None:
        """A stage raised ``exc`` on this rank: what the training type knows about it, as an
        error to raise in its place (None: ``exc`` stands)."""
        return None

    def teardown(self) -> None:
        pass

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Set up for one stage and tear down after it, whatever happens."""
        self.setup_environment()
        try:
            yield
        except BaseException as exc:
            replacement = self.on_exception(exc)
            if replacement is None:
                raise
            # It says all that ``exc`` did, first: ``exc`` stays its __context__, unprinted.
            raise replacement from None
        finally:
            self.teardown()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
