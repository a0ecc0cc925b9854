"""Restarts: a fit that starts again after a rank failed and carries on exactly where the newest
complete checkpoint left it. One contract for every launcher that restarts ranks — ddpkit's own
(``Trainer(max_restarts=N)`` on either Trainer), torchrun (``--max-restarts``), ``ddpkit run
--max-restarts`` — and for both loops, which reach it through one port (:class:`.port.FitPort`:
``ddpkit.trainer._fit_port.LoopFit`` and ``ddpkit.lightning._restart.LightningFit``).

The launcher (:mod:`.attempts`). A job that ends badly ends as it always does (every rank ended,
the root cause known). If it was a fit and a rank failed — it raised, was killed, stalled,
exited — the launch runs again as a new job: new ranks, a fresh rendezvous (a new port and a new
key), and the attempt in every rank's environment (:class:`.attempt.Attempt`:
``TORCHELASTIC_RESTART_COUNT=k`` for the k-th restart, as torchrun sets it), up to
``max_restarts`` times. Never restarted: an interrupt (SIGINT / SIGTERM to the launching
process), a ``MisconfigurationError`` (on any rank: it would fail the same way again), a
``LaunchError`` (nothing could start). Restarts used up: the last attempt's error, with a note
naming every attempt's root cause. The run folder (``DDPKIT_RUN_DIR``, private like the scratch
directories and swept the same way) lives as long as the launch.

The ranks (:mod:`.resume`). Every checkpoint a fit writes on all ranks carries each rank's RNG
states (gathered as bytes in tensors). Rank 0 of a restarted fit resumes from the newest
*complete* checkpoint written since the run started (``DDPKIT_RUN_STARTED``; without it, since
the process that restarts the ranks started — torchrun's agent, ``ddpkit run`` — the parent of
every rank) in the fit's checkpoint folders, tells the other ranks as JSON, and prints one line
naming the cause (``DDPKIT_RESTART_CAUSE``) and where it resumes; every rank sets its RNG states
back just before the first epoch, so dropout masks and shuffles go on as they would have.
Without a ModelCheckpoint, a fit that may restart keeps ddpkit's own checkpoint at every epoch's
end in the run folder (:func:`.in_process.save_kept`). A restarted fit is the same run: its
loggers go on in the files the attempts before it wrote.

The launching process (:mod:`.in_process`). Rank 0 of ddpkit's subprocess launcher is the
user's own process, which no launcher restarts: it learns its attempt in-process (its
environment stays as the user made it) and runs the fit again itself. The failed attempt is
ended as the loop ends a failed fit, and the fit goes back to what it held when it first started
(RNG states, weights, the callbacks' and the loop's own state), as a new process would be.
"""
