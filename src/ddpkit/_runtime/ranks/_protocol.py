"""The rank side of the protocol: what a rank that one of ddpkit's launchers started does around
each stage, whichever training type runs it.

The launcher tells the rank through its environment (:mod:`ddpkit._runtime.ranks._names`):

- ``DDPKIT_PARENT_PID``: the rank ends when that process is gone (:func:`watch_parent`);
- ``DDPKIT_STAGE_FILE``: the rank writes how many stages it has started, so that rank 0's
  supervisor can tell a rank that started a stage rank 0 never called (it would wait there
  until the timeout) from one that is merely slow;
- ``DDPKIT_ERROR_FILE``: a stage that raises leaves its traceback there (:mod:`ddpkit._runtime.ranks
  .errorfile`), marked as a lost peer when another rank's end caused it; the launcher's report
  shows it, so the rank does not print it again when it ends the script;
- ``DDPKIT_SKIP_STAGES``: a child of a restarted job re-runs the script, whose first stages
  ended before the failure: rank 0 does not run them again, so the child skips them
  (:func:`skip_stage`).

Outside a launcher of ddpkit's (one process, torchrun, srun) none is set and nothing happens.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator, Mapping

from ddpkit._runtime.ranks._errorfile import quiet_when_uncaught, report_rank_failure
from ddpkit._runtime.ranks._lifeline import watch_parent
from ddpkit._runtime.ranks._names import (
    ENV_ERROR_FILE,
    ENV_PARENT_PID,
    ENV_SKIP_STAGES,
    ENV_STAGE_FILE,
)
from ddpkit._runtime.ranks._scratch import write_private

#: the stages this process has started (a rank process runs the script's stages in order)
_stage_count = itertools.count(1)
#: the distributed stages this process was asked to run, skipped ones included
_asked = itertools.count(1)


def skip_stage(env: Mapping[str, str] | None = None) -> bool:
    """Called once by each distributed stage of a rank, before anything else: True when the
    stage is one to skip (``DDPKIT_SKIP_STAGES``: a restarted job's child, whose script's first
    stages ended before the failure)."""
    env = os.environ if env is None else env
    skip = env.get(ENV_SKIP_STAGES, "")
    return skip.isdecimal() and next(_asked) <= int(skip)


@contextlib.contextmanager
def rank_stage() -> Iterator[int]:
    """Around one stage of this rank; yields the stage's number in this process."""
    env = os.environ
    number = next(_stage_count)
    parent = env.get(ENV_PARENT_PID, "")
    if parent.isdecimal():
        watch_parent(int(parent))
    stage_file = env.get(ENV_STAGE_FILE)
    if stage_file:
        with contextlib.suppress(OSError):
            write_private(stage_file, str(number).encode())
    try:
        yield number
    except BaseException as exc:
        if report_rank_failure(env.get(ENV_ERROR_FILE), exc):
            quiet_when_uncaught(exc)  # the launcher's report shows it, once
        raise
