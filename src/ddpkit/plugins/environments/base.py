"""What every cluster environment answers: who started the ranks, and where ranks come from."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

__all__ = ["ClusterEnvironment"]


class ClusterEnvironment(ABC):
    """A read-only view of the variables a process launcher left in the environment.

    ``env`` is the mapping to read (the probe's snapshot); ``None`` reads ``os.environ`` lazily,
    which is what a user-built instance passed in ``plugins=[...]`` gets.
    """

    #: short name shown by ``ddpkit explain`` and ``ddpkit env``
    name: ClassVar[str] = "base"
    #: the variables whose presence makes :meth:`detect` true (shown in reasons)
    detection_variables: ClassVar[tuple[str, ...]] = ()

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env

    @property
    def env(self) -> Mapping[str, str]:
        if self._env is None:
            import os

            return os.environ
        return self._env

    @classmethod
    @abstractmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        """True when ``env`` shows that this launcher started the current process."""

    @classmethod
    def matched_variables(cls, env: Mapping[str, str]) -> dict[str, str]:
        """The detection variables present in ``env``, for reasons and ``ddpkit env``."""
        return {k: env[k] for k in cls.detection_variables if k in env}

    @property
    @abstractmethod
    def creates_processes_externally(self) -> bool:
        """True when something other than ddpkit starts every rank (torchrun, srun)."""

    @abstractmethod
    def main_address(self) -> str: ...

    @abstractmethod
    def main_port(self) -> int: ...

    @abstractmethod
    def world_size(self) -> int: ...

    @abstractmethod
    def global_rank(self) -> int: ...

    @abstractmethod
    def local_rank(self) -> int: ...

    @abstractmethod
    def node_rank(self) -> int: ...

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        """Raise :class:`MisconfigurationError` when the flags disagree with the launcher.

        ``devices`` is the processes per node the flags ask for; ``call`` is the user's call,
        quoted at the start of the message.
        """

    def __getstate__(self) -> dict[str, object]:
        # The probe's snapshot is a read-only mapping proxy, which does not pickle.
        state = self.__dict__.copy()
        if state.get("_env") is not None:
            state["_env"] = dict(state["_env"])
        return state

    def _int(self, key: str, default: int | None = None) -> int:
        from ddpkit.errors import MisconfigurationError

        raw = self.env.get(key)
        if raw is None:
            if default is None:
                raise MisconfigurationError(
                    f"{type(self).__name__}: the environment variable {key} is not set; "
                    f"it is needed to know this process's rank."
                )
            return default
        try:
            return int(raw)
        except ValueError:
            raise MisconfigurationError(
                f"{type(self).__name__}: {key}={raw!r} is not an integer."
            ) from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
