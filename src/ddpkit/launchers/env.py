"""The environment of a rank ddpkit starts, as a pure dict."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["RANK_VARIABLES", "rank_env"]

#: The variables ddpkit sets for each rank it starts; nothing else changes.
RANK_VARIABLES = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "NODE_RANK",
    "LOCAL_RANK",
    "DDPKIT_PARENT_PID",
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
) -> dict[str, str]:
    """``base`` plus the rank variables. GPU ids are never set here: each rank picks its device
    by ``LOCAL_RANK``, and CPU ranks must not see a ``CUDA_VISIBLE_DEVICES`` they did not have."""
    env = dict(base)
    env.update(
        MASTER_ADDR=main_address,
        MASTER_PORT=str(main_port),
        WORLD_SIZE=str(world_size),
        NODE_RANK=str(node_rank),
        LOCAL_RANK=str(local_rank),
        DDPKIT_PARENT_PID=str(parent_pid),
    )
    return env
