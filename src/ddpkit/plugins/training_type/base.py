"""What every training type does: where the model lives and how ranks cooperate."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

import torch

from ddpkit.accelerators.base import Accelerator
from ddpkit.plugins.environments.base import ClusterEnvironment
from ddpkit.plugins.precision.base import PrecisionPlugin

__all__ = ["TrainingTypePlugin"]


class TrainingTypePlugin(ABC):
    """How ranks cooperate. The connector calls :meth:`connect` exactly once, filling in what the
    user left unset; after that the object is complete and decides nothing more."""

    #: the registry name of this kind of training type
    name: ClassVar[str]
    #: who starts the ranks when no external launcher (torchrun, srun) did
    launcher_name: ClassVar[str]

    def __init__(
        self,
        parallel_devices: list[torch.device] | None = None,
        num_nodes: int | None = None,
        cluster_environment: ClusterEnvironment | None = None,
        sync_batchnorm: bool | None = None,
    ) -> None:
        self._parallel_devices = list(parallel_devices) if parallel_devices is not None else None
        self._num_nodes = num_nodes
        self._cluster_environment = cluster_environment
        self._sync_batchnorm = sync_batchnorm
        self._accelerator: Accelerator | None = None
        self._precision_plugin: PrecisionPlugin | None = None

    def unset_fields(self) -> list[str]:
        """The fields the user left for the connector to fill in (shown in the plan)."""
        fields = {
            "parallel_devices": self._parallel_devices,
            "num_nodes": self._num_nodes,
            "cluster_environment": self._cluster_environment,
        }
        return [name for name, value in fields.items() if value is None]

    # -- filled in once by the connector -------------------------------------------------------

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
        """Fill in every field the user left unset; return one note per field filled in."""
        notes: list[str] = []
        self._accelerator = accelerator
        self._precision_plugin = precision_plugin
        if self._parallel_devices is None:
            self._parallel_devices = list(parallel_devices)
            notes.append(f"parallel_devices={_short_devices(parallel_devices)}")
        if self._num_nodes is None:
            self._num_nodes = num_nodes
            notes.append(f"num_nodes={num_nodes}")
        if self._cluster_environment is None:
            self._cluster_environment = cluster_environment
            notes.append(f"cluster_environment={type(cluster_environment).__name__}")
        if self._sync_batchnorm is None:
            self._sync_batchnorm = sync_batchnorm
        return notes

    @property
    def accelerator(self) -> Accelerator:
        if self._accelerator is None:
            raise RuntimeError(f"{type(self).__name__} is used before a Trainer connected it")
        return self._accelerator

    @property
    def precision_plugin(self) -> PrecisionPlugin:
        if self._precision_plugin is None:
            raise RuntimeError(f"{type(self).__name__} is used before a Trainer connected it")
        return self._precision_plugin

    @property
    def cluster_environment(self) -> ClusterEnvironment | None:
        return self._cluster_environment

    @property
    def parallel_devices(self) -> list[torch.device]:
        return list(self._parallel_devices or [])

    @property
    def num_nodes(self) -> int:
        return self._num_nodes or 1

    @property
    def sync_batchnorm(self) -> bool:
        return bool(self._sync_batchnorm)

    @property
    def num_processes(self) -> int:
        """Processes per node."""
        return len(self._parallel_devices or [None])

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
    @abstractmethod
    def root_device(self) -> torch.device:
        """The device of this rank."""

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

    def teardown(self) -> None:
        pass

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Set up for one stage and tear down after it, whatever happens."""
        self.setup_environment()
        try:
            yield
        finally:
            self.teardown()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _short_devices(devices: list[torch.device]) -> str:
    return "[" + ", ".join(str(d) for d in devices) + "]"
