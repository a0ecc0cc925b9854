"""The port between restart and a front-end's loop: what restart needs of a fit, as Protocols.

ddpkit's loop implements :class:`FitPort` once (``ddpkit.trainer._fit_port.LoopFit``), Lightning's
loop once (``ddpkit.lightning._restart.LightningFit``); restart knows nothing else of either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from torch import nn


class _InJob(Protocol):
    """How many ranks the job has, and whether this process is rank 0."""

    @property
    def world_size(self) -> int: ...

    @property
    def is_global_zero(self) -> bool: ...


class Ranks(_InJob, Protocol):
    """Who this process is in the job, and ddpkit's own exchanges between the ranks (JSON and
    bytes in tensors, never a pickle). Every ddpkit training type is one."""

    @property
    def global_rank(self) -> int: ...

    def broadcast_json(self, obj: Any, src: int = 0) -> Any: ...

    def all_gather_bytes(self, data: bytes) -> list[bytes]: ...


class Stateful(Protocol):
    """A callback, as far as restart keeps and restores it."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


class FitPort(Protocol):
    """One ``fit`` of a front-end, as restart sees it."""

    @property
    def ranks(self) -> Ranks: ...

    @property
    def model(self) -> nn.Module: ...

    @property
    def callbacks(self) -> Sequence[Stateful]:
        """The Trainer's callbacks, in its order."""

    def checkpoint_folders(self) -> list[str]:
        """Where this fit's checkpoints go (a restarted fit resumes from the newest there)."""

    def position(self, checkpoint: Mapping[str, Any] | None) -> str:
        """Where ``checkpoint`` stands in this loop's layout: "epoch 2, global step 16"."""

    def loop_state(self) -> dict[str, Any]:
        """What the loop holds of its own that a new process would start without."""

    def load_loop_state(self, state: dict[str, Any]) -> None: ...

    def end_failed(self, exc: BaseException) -> None:
        """End the attempt that raised ``exc`` as the loop ends a failed fit (if the loop has
        not already)."""


class Checkpointing(_InJob, Protocol):
    """A Trainer, as the hook that writes ddpkit's own checkpoint sees it (either Trainer)."""

    @property
    def sanity_checking(self) -> bool: ...

    def save_checkpoint(self, filepath: Path) -> None: ...
