"""Every ``DDPKIT_*`` environment variable, in one place.

The rank <-> launcher protocol: a launcher of ddpkit's sets these for every rank it starts (see
:func:`ddpkit._runtime.launch._env.rank_env`); the rank side
(:mod:`ddpkit._runtime.ranks._protocol`) reads them. The torch.distributed variables
(``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``NODE_RANK``, ``LOCAL_RANK``) are set beside
them. Then the pytest plugin's (an isolated test's interpreter and its zygote) and
``seed_everything``'s.
"""

from __future__ import annotations

#: the pid of the process that started this rank: the rank ends when it is gone
ENV_PARENT_PID = "DDPKIT_PARENT_PID"
#: where a failing rank leaves its report (JSON, in the launcher's private 0700 directory)
ENV_ERROR_FILE = "DDPKIT_ERROR_FILE"
#: Python's own switch for faulthandler at start-up; ddpkit's launchers set it to "1" in each
#: rank they start unless the user's environment sets it: a rank that dies of SIGSEGV, SIGABRT,
#: SIGBUS, SIGFPE or SIGILL (a crash in C++) then prints every thread's Python stack
ENV_FAULTHANDLER = "PYTHONFAULTHANDLER"
#: where a rank started by the subprocess launcher counts the stages it has started
ENV_STAGE_FILE = "DDPKIT_STAGE_FILE"
#: the job's key: the unguessable prefix of its keys in the rendezvous store
ENV_JOB_KEY = "DDPKIT_JOB_KEY"

# -- restarts (``max_restarts``; torchrun's own two variables first) -----------------------------

#: which attempt this is: 0 first, k ≥ 1 for the k-th restart (torchrun sets it; so do ddpkit's
#: launchers and ``ddpkit run``); above 0, a fit resumes from the newest complete checkpoint
ENV_RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"
#: how many restarts the job may make (torchrun's; ddpkit's launchers set it too)
ENV_MAX_RESTARTS = "TORCHELASTIC_MAX_RESTARTS"
#: why the previous attempt ended ("rank 1 (pid 8012) killed by signal SIGKILL"), for the line
#: the restarted rank 0 prints
ENV_RESTART_CAUSE = "DDPKIT_RESTART_CAUSE"
#: when the first attempt started (``time.time()``): a restart resumes from checkpoints written
#: since then only
ENV_RUN_STARTED = "DDPKIT_RUN_STARTED"
#: the launcher's private folder for the run's restarts (ddpkit's own checkpoint, when the user
#: has no ModelCheckpoint)
ENV_RUN_DIR = "DDPKIT_RUN_DIR"
#: in a child of a restarted subprocess job: how many of the script's stages to skip (they ended
#: before the failure; rank 0 does not run them again)
ENV_SKIP_STAGES = "DDPKIT_SKIP_STAGES"

# -- the pytest plugin (ddpkit.testing) --------------------------------------------------------

#: ``1`` in the interpreter the plugin starts for one isolated test (and in the ranks it starts):
#: run the test inline, and a DDPPlugin may re-run this command line
ENV_ISOLATED_TEST = "DDPKIT_STANDALONE_CHILD"
#: where each process of an isolated test leaves its files (a private 0700 directory)
ENV_TESTING_DIR = "DDPKIT_TESTING_DIR"
#: the parent pytest: a process whose parent it is was started by it
ENV_TESTING_PARENT = "DDPKIT_TESTING_PARENT"
#: where the parent sends an isolated process's output
ENV_TESTING_LOG = "DDPKIT_TESTING_LOG"
#: rank 0 of a distributed test: the descriptor of the listening socket its store serves on
ENV_TESTING_STORE_FD = "DDPKIT_TESTING_STORE_FD"
#: the zygote's end of its socket pair with the parent pytest
ENV_ZYGOTE_FD = "DDPKIT_ZYGOTE_FD"
#: the modules the zygote preloads
ENV_ZYGOTE_PRELOAD = "DDPKIT_ZYGOTE_PRELOAD"
