"""The rank <-> launcher protocol: what a rank and the launcher that started it tell each other.

Below both ``ddpkit.plugins`` (the training types run in the ranks) and ``ddpkit._runtime.launch``
(rank 0's side): the variable names (:mod:`~ddpkit._runtime.ranks._names`), the error file
(:mod:`~ddpkit._runtime.ranks._errorfile`), the stage counter and the rank's part of each stage
(:mod:`~ddpkit._runtime.ranks._protocol`), the stall watchdog
(:mod:`~ddpkit._runtime.ranks._stall`), the lifeline that ends a rank with its parent
(:mod:`~ddpkit._runtime.ranks._lifeline`), the launcher's private scratch directory
(:mod:`~ddpkit._runtime.ranks._scratch`) and the rendezvous
(:mod:`~ddpkit._runtime.ranks._rendezvous`). The supervising side of it, for every parent ddpkit
has (both launchers, ``ddpkit run``, and the pytest plugin's parent of an isolated test) is
:mod:`ddpkit._runtime.process`.
"""
