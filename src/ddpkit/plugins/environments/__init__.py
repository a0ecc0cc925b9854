"""Cluster environments: who started the ranks, and where rank numbers come from."""

from ddpkit.plugins.environments.base import ClusterEnvironment
from ddpkit.plugins.environments.kubeflow import KubeflowEnvironment
from ddpkit.plugins.environments.local import LightningEnvironment, LocalEnvironment
from ddpkit.plugins.environments.lsf import LSFEnvironment
from ddpkit.plugins.environments.mpi import MPIEnvironment
from ddpkit.plugins.environments.slurm import SLURMEnvironment
from ddpkit.plugins.environments.torchelastic import TorchElasticEnvironment

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
