"""What every cluster environment answers: who started the ranks, and where ranks come from.

Lightning 1.x's API is kept, so a user's 1.x ``ClusterEnvironment`` subclass plugs in as written:
a subclass implements either spelling of each pair below and the other one follows, and
``set_world_size``, ``set_global_rank`` and ``teardown`` exist.

=================================  ===================================
2.x spelling (ddpkit's own)        1.x spelling
=================================  ===================================
``main_address()``                 ``master_address()``
``main_port()``                    ``master_port()``
``creates_processes_externally``   ``creates_children()``
=================================  ===================================
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Mapping
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._reprs import safe_repr

#: the methods a usable environment has, in one spelling or the other
_PAIRS = (
    ("main_address", "master_address"),
    ("main_port", "master_port"),
    ("creates_processes_externally", "creates_children"),
)
_REQUIRED = ("world_size", "global_rank", "local_rank", "node_rank")


class ClusterEnvironment:
    """A read-only view of the variables a process launcher left in the environment.

    ``env`` is the mapping to read (the probe's snapshot, for the environments the connector
    builds); ``None`` reads ``os.environ`` when asked, which is what a user-built instance passed
    in ``plugins=[...]`` gets.
    """

    #: short name shown by ``ddpkit explain`` and ``ddpkit env``
    name: ClassVar[str] = "custom"
    #: the variables whose presence makes :meth:`detect` true (shown in reasons)
    detection_variables: ClassVar[tuple[str, ...]] = ()

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        if env is not None and not (
            isinstance(env, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            name = type(self).__name__
            raise MisconfigurationError(
                f"{name}(env={safe_repr(env)}): env is the environment variables to read, a "
                f"mapping of str to str (None: os.environ, read when asked). Fix: {name}() or "
                f"{name}(env=dict(os.environ))."
            )
        self._env = env
        self._world_size: int | None = None
        self._global_rank: int | None = None

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        """True when ``env`` shows that this launcher started the current process. A user's own
        environment is never detected: it is used when passed in ``plugins=[...]``."""
        return False

    @classmethod
    def matched_variables(cls, env: Mapping[str, str]) -> dict[str, str]:
        """The detection variables present in ``env``, for reasons and ``ddpkit env``."""
        return {k: env[k] for k in cls.detection_variables if k in env}

    # -- either spelling (see the module docstring) ----------------------------------------------

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # A class that defines one spelling of a pair gets the other from it, so that a 1.x
        # subclass of a ddpkit environment (which defines the 2.x names) is asked what it says.
        for modern, legacy in _PAIRS:
            if legacy in cls.__dict__ and modern not in cls.__dict__:
                setattr(cls, modern, _delegate(modern, legacy))
            elif modern in cls.__dict__ and legacy not in cls.__dict__:
                setattr(cls, legacy, _delegate(legacy, modern))

    @property
    def creates_processes_externally(self) -> bool:
        """True when something other than ddpkit starts every rank (torchrun, srun)."""
        raise NotImplementedError(
            _neither(self, "creates_processes_externally", "creates_children")
        )

    def creates_children(self) -> bool:
        """Lightning 1.x's name for :attr:`creates_processes_externally`."""
        return self.creates_processes_externally

    def main_address(self) -> str:
        raise NotImplementedError(_neither(self, "main_address", "master_address"))

    def master_address(self) -> str:
        """Lightning 1.x's name for :meth:`main_address`."""
        return self.main_address()

    def main_port(self) -> int:
        raise NotImplementedError(_neither(self, "main_port", "master_port"))

    def master_port(self) -> int:
        """Lightning 1.x's name for :meth:`main_port`."""
        return self.main_port()

    # -- ranks: set by the training type (1.x), else the subclass's -------------------------------

    def world_size(self) -> int:
        if self._world_size is None:
            raise NotImplementedError(f"{type(self).__name__} does not implement world_size()")
        return self._world_size

    def set_world_size(self, size: int) -> None:
        """Called by the training type at set-up with the job's world size (Lightning 1.x)."""
        self._world_size = size

    def global_rank(self) -> int:
        if self._global_rank is None:
            raise NotImplementedError(f"{type(self).__name__} does not implement global_rank()")
        return self._global_rank

    def set_global_rank(self, rank: int) -> None:
        """Called by the training type at set-up with this process's global rank (1.x)."""
        self._global_rank = rank

    def local_rank(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not implement local_rank()")

    def node_rank(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not implement node_rank()")

    def teardown(self) -> None:
        """Called by the training type after each stage (Lightning 1.x)."""

    # -- checks ----------------------------------------------------------------------------------

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        """Raise :class:`MisconfigurationError` when the flags disagree with the launcher.

        ``devices`` is the processes per node the flags ask for; ``call`` is the user's call,
        quoted at the start of the message.
        """

    @classmethod
    def missing_methods(cls) -> list[str]:
        """What a subclass must implement and does not (``a() or b()`` for a pair)."""
        missing = [
            f"{modern} (or {legacy})"
            for modern, legacy in _PAIRS
            if not _overrides(cls, modern) and not _overrides(cls, legacy)
        ]
        return missing + [f"{name}()" for name in _REQUIRED if not _overrides(cls, name)]

    def _check_integers(self, call: str, keys: tuple[str, ...]) -> None:
        """At plan time: each of ``keys`` that is set holds an integer (the message quotes the
        user's call, which the runtime reads cannot)."""
        for key in keys:
            if key in self.env:
                try:
                    self._int(key)
                except MisconfigurationError:
                    raise MisconfigurationError(
                        f"{call}: {key}={self.env[key]!r} is not an integer. Fix: set {key} to "
                        f"a whole number, or unset it."
                    ) from None

    def _int(self, key: str, default: int | None = None) -> int:
        raw = self.env.get(key)
        if raw is None:
            if default is None:
                raise MisconfigurationError(
                    f"{type(self).__name__}: the environment variable {key} is not set; it is "
                    f"needed to know this process's rank. Fix: start the process with the "
                    f"launcher that sets it, or pass an environment that matches this one."
                )
            return default
        value = raw.strip()
        if not (value.isascii() and value.lstrip("-").isdigit()):
            raise MisconfigurationError(
                f"{type(self).__name__}: {key}={raw!r} is not an integer. Fix: set {key} to a "
                f"whole number, or unset it."
            )
        return int(value)

    def __getstate__(self) -> dict[str, object]:
        # The probe's snapshot is a read-only mapping proxy, which does not pickle.
        state = self.__dict__.copy()
        if state.get("_env") is not None:
            state["_env"] = dict(state["_env"])
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _neither(env: ClusterEnvironment, modern: str, legacy: str) -> str:
    return f"{type(env).__name__} implements neither {modern} nor {legacy}"


def _delegate(name: str, target: str) -> object:
    """``name`` implemented by calling ``target`` (a property where the 2.x name is one)."""
    if name == "creates_processes_externally":
        return property(lambda self: bool(getattr(self, target)()))
    if target == "creates_processes_externally":
        return lambda self: bool(getattr(self, target))
    return lambda self: getattr(self, target)()


def _overrides(cls: type, name: str) -> bool:
    """True when ``cls`` (or a class between it and ClusterEnvironment) defines ``name``."""
    below = itertools.takewhile(lambda klass: klass is not ClusterEnvironment, cls.__mro__)
    return any(name in klass.__dict__ for klass in below)


class ExternalEnvironment(ClusterEnvironment):
    """A launcher outside ddpkit (torchrun, srun, jsrun, mpirun, Kubeflow's operator) starts
    every rank, and decides the ranks: ddpkit starts none."""

    @property
    def creates_processes_externally(self) -> bool:
        return True

    def _ignored(self, log: logging.Logger, owner: str, what: str) -> None:
        """A ``set_*`` call of a 1.x training type for ``what`` ("world size"), which the
        launcher decides: ignored, with Lightning 1.x's DEBUG line (``owner``: the class 1.x
        names in it)."""
        setter = f"set_{what.replace(' ', '_')}"
        log.debug(f"{owner}.{setter} was called, but setting {what} is not allowed. Ignored.")
