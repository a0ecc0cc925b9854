"""``max_restarts`` checked before any rank starts, for either Trainer."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from ddpkit.errors import MisconfigurationError

T_co = TypeVar("T_co", covariant=True)


class _Chosen(Protocol, Generic[T_co]):
    @property
    def value(self) -> T_co: ...


class RanksPlan(Protocol):
    """What the check reads of the connector's plan (``ddpkit.connector.Plan``): who started
    the ranks, who starts them, and on how many machines."""

    @property
    def environment(self) -> _Chosen[str]: ...

    @property
    def launcher(self) -> _Chosen[str]: ...

    @property
    def num_nodes(self) -> _Chosen[int]: ...


def check_max_restarts(call: str, value: Any) -> int:
    """``max_restarts``: an int ≥ 0 (``call``: the class the user called)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MisconfigurationError(
            f"{call}(max_restarts={value!r}): pass an int ≥ 0 (0: a failure ends the job). "
            f"Fix: {call}(max_restarts=1)."
        )
    return value


def check_restarts(max_restarts: int, plan: RanksPlan) -> None:
    """``Trainer(max_restarts=N)`` restarts the ranks ddpkit's launchers start, on this machine:
    anything else is refused here, before any rank starts."""
    if not max_restarts:
        return
    call = f"Trainer(max_restarts={max_restarts})"
    environment, nodes = plan.environment.value, plan.num_nodes.value
    if environment != "local":
        raise MisconfigurationError(
            f"{call}: the ranks were started by {environment} (not ddpkit), which "
            f"restarts them itself. Fix: drop max_restarts and let the launcher restart the "
            f"ranks (torchrun --max-restarts {max_restarts}); each restarted fit resumes from "
            f"the newest complete checkpoint by itself."
        )
    if plan.launcher.value == "none":
        raise MisconfigurationError(
            f"{call}: this run is one process, and a restart starts the ranks again. Fix: "
            f"run several ranks (devices=2, strategy='ddp'), or drop max_restarts."
        )
    if nodes > 1:
        raise MisconfigurationError(
            f"{call} with num_nodes={nodes}: ddpkit's launcher on each machine "
            f"starts that machine's ranks only and cannot restart the others. Fix: start the "
            f"job with torchrun --nnodes={nodes} --max-restarts {max_restarts} "
            f"(and drop max_restarts here)."
        )
