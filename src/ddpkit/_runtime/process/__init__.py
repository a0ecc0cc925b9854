"""The processes of a job, as the process that started them sees them: every launcher
(subprocess, spawn and fork), ``ddpkit run``, and the pytest plugin's parent of an isolated test.

A started process is a :class:`~.proc.Rank` over a :class:`~.proc.Proc` (a ``Popen``, a
``multiprocessing.Process``, a fork), started in the process's lifetime thread
(:mod:`.starter`) and dying with its parent (:mod:`ddpkit._runtime.ranks._lifeline`); what its rank
tells the parent is in the job's files (:class:`~.files.JobFiles`). A job ends all or nothing
(:mod:`.ending`): the first rank that fails is the root cause, every other process of the job is
ended (SIGTERM, SIGKILL after a grace period), and each rank's fate is reported, root cause
first. SIGINT and SIGTERM to the supervising process only set a flag (:mod:`.signals`).
"""
