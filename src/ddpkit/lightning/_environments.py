"""Cluster environments across the two APIs: ddpkit's (which the connector resolves) and
Lightning's (which Lightning's strategy runs with).

The connector decides *which* environment runs (the user's, torchrun, SLURM, LSF, Kubeflow, MPI
or local); this module hands Lightning the matching object of its own. ddpkit's built-in
environments map to the Lightning classes that read the same variables, except MPI: Lightning's
``MPIEnvironment`` needs mpi4py and asks MPI for every rank number, so ddpkit's (which reads them
from the launcher's variables) answers Lightning through :class:`ToLightning`. Any other
environment is the user's own and is carried across as it is:

- a Lightning environment in ``plugins=[...]`` (1.x users wrote ``plugins=[SLURMEnvironment()]``)
  enters the connector as :class:`FromLightning` (Lightning's default ``LightningEnvironment``
  as ddpkit's local one, :class:`LightningEnvironment`) and comes back out as the user's own
  object;
- a ddpkit environment of the user's (a ``ClusterEnvironment`` subclass) runs on Lightning as
  :class:`ToLightning`, which asks it every question Lightning asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from lightning_fabric.plugins import ClusterEnvironment as LightningClusterEnvironment
from lightning_fabric.plugins.environments.kubeflow import (
    KubeflowEnvironment as LightningKubeflowEnvironment,
)
from lightning_fabric.plugins.environments.lightning import (
    LightningEnvironment as LightningsLightningEnvironment,
)
from lightning_fabric.plugins.environments.lsf import LSFEnvironment as LightningLSFEnvironment
from lightning_fabric.plugins.environments.slurm import (
    SLURMEnvironment as LightningSLURMEnvironment,
)
from lightning_fabric.plugins.environments.torchelastic import (
    TorchElasticEnvironment as LightningTorchElasticEnvironment,
)

from ddpkit.plugins.environments import (
    ClusterEnvironment,
    KubeflowEnvironment,
    LocalEnvironment,
    LSFEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)

#: ddpkit's built-in environments and the Lightning classes that read the same variables.
_BUILT_IN: dict[type[ClusterEnvironment], type[LightningClusterEnvironment]] = {
    LocalEnvironment: LightningsLightningEnvironment,
    TorchElasticEnvironment: LightningTorchElasticEnvironment,
    SLURMEnvironment: LightningSLURMEnvironment,
    KubeflowEnvironment: LightningKubeflowEnvironment,
    LSFEnvironment: LightningLSFEnvironment,
}


class LightningEnvironment(LocalEnvironment):
    """Lightning's own ``LightningEnvironment`` (the default one: ranks started on this machine),
    passed by the user with 1.x device flags. To the connector it is what it means — ddpkit's
    local environment, the user's own — and Lightning gets the user's object back."""

    def __init__(self, environment: LightningClusterEnvironment) -> None:
        super().__init__()
        self.lightning = environment

    def __repr__(self) -> str:
        return "LightningEnvironment()"


class FromLightning(ClusterEnvironment):
    """A Lightning cluster environment the user passed with 1.x device flags, as the connector
    sees it: it answers from the Lightning object, and it beats every detected environment, as
    the user's own environment does."""

    name: ClassVar[str] = "lightning"

    def __init__(self, environment: LightningClusterEnvironment) -> None:
        super().__init__()
        self.lightning = environment

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return True

    @property
    def creates_processes_externally(self) -> bool:
        return bool(self.lightning.creates_processes_externally)

    def main_address(self) -> str:
        return str(self.lightning.main_address)

    def main_port(self) -> int:
        return int(self.lightning.main_port)

    def world_size(self) -> int:
        return int(self.lightning.world_size())

    def global_rank(self) -> int:
        return int(self.lightning.global_rank())

    def local_rank(self) -> int:
        return int(self.lightning.local_rank())

    def node_rank(self) -> int:
        return int(self.lightning.node_rank())

    def __repr__(self) -> str:
        return lightning_spelling(self.lightning)


class ToLightning(LightningClusterEnvironment):
    """A ddpkit cluster environment of the user's own, running under Lightning's strategy.

    Lightning tells its environment the world size and the global rank it computed
    (``set_world_size`` / ``set_global_rank``); they are kept here and answered back, while
    everything the job's launcher knows (address, port, local and node rank) comes from the
    user's environment.
    """

    def __init__(self, environment: ClusterEnvironment) -> None:
        super().__init__()
        self.ddpkit = environment
        self._world_size: int | None = None
        self._global_rank: int | None = None

    @property
    def creates_processes_externally(self) -> bool:
        return self.ddpkit.creates_processes_externally

    @property
    def main_address(self) -> str:
        return self.ddpkit.main_address()

    @property
    def main_port(self) -> int:
        return self.ddpkit.main_port()

    @staticmethod
    def detect() -> bool:
        return True

    def world_size(self) -> int:
        return self.ddpkit.world_size() if self._world_size is None else self._world_size

    def set_world_size(self, size: int) -> None:
        self._world_size = size

    def global_rank(self) -> int:
        return self.ddpkit.global_rank() if self._global_rank is None else self._global_rank

    def set_global_rank(self, rank: int) -> None:
        self._global_rank = rank

    def local_rank(self) -> int:
        return self.ddpkit.local_rank()

    def node_rank(self) -> int:
        return self.ddpkit.node_rank()

    def __repr__(self) -> str:
        return repr(self.ddpkit)


def from_lightning(environment: LightningClusterEnvironment) -> ClusterEnvironment:
    """A Lightning environment of the user's, as the connector sees it: Lightning's default one
    is ddpkit's local environment; any other answers from the Lightning object."""
    if type(environment) is LightningsLightningEnvironment:
        return LightningEnvironment(environment)
    return FromLightning(environment)


def to_lightning(environment: ClusterEnvironment) -> LightningClusterEnvironment:
    """The Lightning environment that reads what ``environment`` reads: the user's own object
    for a Lightning environment they passed, Lightning's class for ddpkit's built-ins (by
    exact type: a subclass of the user's has its own answers), else :class:`ToLightning`
    (ddpkit's MPIEnvironment among them: see the module docstring)."""
    if isinstance(environment, FromLightning | LightningEnvironment):
        return environment.lightning
    lightning = _BUILT_IN.get(type(environment))
    if lightning is not None:
        return lightning()
    return ToLightning(environment)


def lightning_spelling(obj: Any) -> str:
    """How the environment (or another object of Lightning's) appears in the modern Lightning
    call: ``repr`` where the class has one of its own, else ``ClassName()``
    (``SLURMEnvironment()``)."""
    if any("__repr__" in vars(cls) for cls in type(obj).__mro__[:-1]):
        return repr(obj)
    return f"{type(obj).__name__}()"
