"""The rank <-> launcher protocol: what a rank and the launcher that started it tell each other.

Below both ``ddpkit.plugins`` (the training types run in the ranks) and ``ddpkit.launchers`` (rank
0's side): the variable names (:mod:`~ddpkit.ranks.names`), the error file
(:mod:`~ddpkit.ranks.errorfile`), the stage counter and the rank's part of each stage
(:mod:`~ddpkit.ranks.protocol`), the stall watchdog (:mod:`~ddpkit.ranks.stall`), the lifeline
that ends a rank with its parent (:mod:`~ddpkit.ranks.lifeline`), the launcher's private scratch
directory (:mod:`~ddpkit.ranks.scratch`) and the rendezvous (:mod:`~ddpkit.ranks.rendezvous`).
The supervising side of it, for every parent ddpkit has (both launchers, ``ddpkit run``, and the
pytest plugin's parent of an isolated test) is :mod:`ddpkit._runtime.process`.
"""

__all__: list[str] = []
