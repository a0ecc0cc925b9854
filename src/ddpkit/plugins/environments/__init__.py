"""Cluster environments: who started the ranks, and where rank numbers come from."""

from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.environments._kubeflow import KubeflowEnvironment
from ddpkit.plugins.environments._local import LightningEnvironment, LocalEnvironment
from ddpkit.plugins.environments._lsf import LSFEnvironment
from ddpkit.plugins.environments._mpi import MPIEnvironment
from ddpkit.plugins.environments._slurm import SLURMEnvironment
from ddpkit.plugins.environments._torchelastic import TorchElasticEnvironment

__all__ = [
    "ClusterEnvironment",
    "KubeflowEnvironment",
    "LSFEnvironment",
    "LightningEnvironment",
    "LocalEnvironment",
    "MPIEnvironment",
    "SLURMEnvironment",
    "TorchElasticEnvironment",
]
