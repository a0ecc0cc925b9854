"""ddpkit's runtime, below both front-ends (``ddpkit.Trainer`` and ``ddpkit.lightning.Trainer``):
what happens to ranks whichever loop trains them — their processes from start to end
(:mod:`.process`) and restarts (:mod:`.restart`), which each front-end reaches through one typed
port (:class:`.restart.port.FitPort`)."""
