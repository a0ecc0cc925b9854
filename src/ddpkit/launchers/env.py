"""The environment of a rank ddpkit starts, as a pure dict."""

from __future__ import annotations

from collections.abc import Mapping

from ddpkit.ranks.names import ENV_ERROR_FILE, ENV_PARENT_PID, ENV_STAGE_FILE

__all__ = ["rank_env"]


def rank_env(
    base: Mapping[str, str],
    *,
    main_address: str,
    main_port: int,
    world_size: int,
    node_rank: int,
    local_rank: int,
    parent_pid: int,
    error_file: str | None = None,
    stage_file: str | None = None,
) -> dict[str, str]:
    """``base`` plus the rank variables (:data:`ddpkit.ranks.names.RANK_VARIABLES`) and, when
    given, where the rank reports its failure and counts its stages. GPU ids are never set
    here: each rank picks its device by ``LOCAL_RANK``, and CPU ranks must not see a
    ``CUDA_VISIBLE_DEVICES`` they did not have."""
    env = dict(base)
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
    if error_file is not None:
        env[ENV_ERROR_FILE] = error_file
    if stage_file is not None:
        env[ENV_STAGE_FILE] = stage_file
    return env
