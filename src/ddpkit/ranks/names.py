"""The environment variables of the rank <-> launcher protocol, in one place.

A launcher of ddpkit's sets these for every rank it starts (see :func:`ddpkit.launchers.env
.rank_env`); the rank side (:mod:`ddpkit.ranks.protocol`) reads them. The torch.distributed
variables (``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``NODE_RANK``, ``LOCAL_RANK``) are
set beside them.
"""

from __future__ import annotations

__all__ = ["ENV_ERROR_FILE", "ENV_PARENT_PID", "ENV_STAGE_FILE", "RANK_VARIABLES"]

#: the pid of the process that started this rank: the rank ends when it is gone
ENV_PARENT_PID = "DDPKIT_PARENT_PID"
#: where a failing rank leaves its report (JSON, in the launcher's private 0700 directory)
ENV_ERROR_FILE = "DDPKIT_ERROR_FILE"
#: where a rank started by the subprocess launcher counts the stages it has started
ENV_STAGE_FILE = "DDPKIT_STAGE_FILE"

#: every variable a launcher of ddpkit's sets for a rank; nothing else of the environment changes
RANK_VARIABLES = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "NODE_RANK",
    "LOCAL_RANK",
    ENV_PARENT_PID,
)
