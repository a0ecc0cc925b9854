"""The rank <-> launcher protocol: what a rank and the launcher that started it tell each other.

Below both ``ddpkit.plugins`` (the training types run in the ranks) and ``ddpkit.launchers`` (rank
0's side): the variable names (:mod:`~ddpkit.ranks.names`), the error file
(:mod:`~ddpkit.ranks.errorfile`), the stage counter and the rank's part of each stage
(:mod:`~ddpkit.ranks.protocol`), the stall watchdog (:mod:`~ddpkit.ranks.stall`), the lifeline
that ends a rank with its parent (:mod:`~ddpkit.ranks.lifeline`), the launcher's private scratch
directory (:mod:`~ddpkit.ranks.scratch`) and the rendezvous (:mod:`~ddpkit.ranks.rendezvous`).
And the supervising side of it, for every parent ddpkit has (both launchers, and the pytest
plugin's parent of an isolated test, which is above the launchers): handles on the ranks
(:mod:`~ddpkit.ranks.handles`) and how a job ends, who is to blame and how each rank's end is
told (:mod:`~ddpkit.ranks.ending`).
"""

__all__: list[str] = []
