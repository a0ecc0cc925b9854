"""The environment a launcher works in: the rank environment it gives each rank it starts (a
pure dict), and what it needs of the cluster environment that lets ddpkit start the ranks."""

from __future__ import annotations

from collections.abc import Mapping

from ddpkit._runtime.ranks._names import ENV_FAULTHANDLER, ENV_PARENT_PID
from ddpkit._runtime.ranks._rendezvous import Rendezvous, StoreHost, job_key
from ddpkit.errors import LaunchError, MisconfigurationError
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.environments._local import RENDEZVOUS_VARIABLES, LocalEnvironment
from ddpkit.plugins.training_type.ddp import DDPPlugin


def launchable_environment(plugin: DDPPlugin) -> ClusterEnvironment:
    """The plugin's environment, which must let ddpkit start the ranks (the plan only names a
    launcher then), with the rendezvous a job of several nodes needs."""
    env = plugin.cluster_environment
    if env is None or env.creates_processes_externally:
        raise LaunchError(
            f"{plugin!r}: its environment {env!r} says someone else starts the ranks, so ddpkit "
            f"launches none. Fix: let the connector build the plan (Trainer(...)), which picks "
            f"the launcher from the environment."
        )
    require_rendezvous(env, plugin.num_processes, plugin.num_nodes)
    return env


def bind_rendezvous(plugin: DDPPlugin, env: ClusterEnvironment) -> Rendezvous:
    """Where the job's ranks meet, under a key of the job's. Node 0 binds the store's socket here,
    before any rank starts, for rank 0's store to serve on: the port is never free in between, a
    busy MASTER_PORT fails before there is a rank to orphan, and when every rank is on this
    machine nothing listens beyond loopback."""
    host = None
    if plugin.node_rank == 0:
        # The port the user chose (None: any free one); a user's own environment says where to
        # meet.
        port = env.requested_port() if isinstance(env, LocalEnvironment) else env.main_port()
        host = StoreHost.bind(port, local_only=plugin.all_ranks_local)
    port = host.port if host is not None else env.main_port()
    key = job_key(plugin.all_ranks_local, env.env)
    return Rendezvous(env.main_address(), port, host, key=key)


def require_rendezvous(env: ClusterEnvironment, per_node: int, num_nodes: int) -> None:
    """Several nodes without a scheduler meet at MASTER_ADDR:MASTER_PORT: without those
    variables the other nodes would wait forever, so nothing starts."""
    missing = [k for k in RENDEZVOUS_VARIABLES if k not in env.env]
    if num_nodes <= 1 or not missing or not isinstance(env, LocalEnvironment):
        return
    raise MisconfigurationError(
        f"Trainer(devices={per_node}, num_nodes={num_nodes}) without torchrun or SLURM: each "
        f"of the {num_nodes} machines starts its {per_node} rank(s) and all "
        f"{num_nodes} × {per_node} = {num_nodes * per_node} meet at MASTER_ADDR:MASTER_PORT, "
        f"but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set here. Fix: on "
        f"every machine run `MASTER_ADDR=<node 0's address> MASTER_PORT=<free port on node "
        f"0> NODE_RANK=<0..{num_nodes - 1}> python script.py ...` (NODE_RANK=0 on node 0)."
    )


def rank_env(
    base: Mapping[str, str],
    *,
    main_address: str,
    main_port: int,
    world_size: int,
    node_rank: int,
    local_rank: int,
    parent_pid: int,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``base`` plus the rank variables (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``,
    ``NODE_RANK``, ``LOCAL_RANK``, ``DDPKIT_PARENT_PID``) and ``extra`` (where the rank reports
    its failure and counts its stages, the job's key, a restart's attempt). GPU ids are never
    set here: each rank picks its device by ``LOCAL_RANK``, and CPU ranks must not see a
    ``CUDA_VISIBLE_DEVICES`` they did not have.
    Python's faulthandler is on (``PYTHONFAULTHANDLER=1``) unless ``base`` says otherwise: the
    report can only say "killed by signal SIGSEGV"; the rank's stderr then shows where."""
    env = dict(base)
    env.setdefault(ENV_FAULTHANDLER, "1")
    env.update(
        {
            "MASTER_ADDR": main_address,
            "MASTER_PORT": str(main_port),
            "WORLD_SIZE": str(world_size),
            "NODE_RANK": str(node_rank),
            "LOCAL_RANK": str(local_rank),
            ENV_PARENT_PID: str(parent_pid),
        }
    )
    env.update(extra or {})
    return env
