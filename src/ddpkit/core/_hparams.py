"""``save_hyperparameters()`` and ``self.hparams``, as Lightning has them.

``save_hyperparameters()`` reads the arguments of the ``__init__`` calls that are running on the
stack (the subclass's and every parent's), so ``Model(lr=0.1)`` gives ``model.hparams.lr == 0.1``
without writing it twice; ``load_from_checkpoint`` later calls ``Model(**hparams)`` again.
"""

from __future__ import annotations

import copy
import inspect
import types
from argparse import Namespace
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from torch import nn

from ddpkit.core._saving import HPARAMS_KEY
from ddpkit.errors import DDPKitWarning, MisconfigurationError
from ddpkit.utilities._rank_zero import rank_zero_warn


class AttributeDict(dict[str, Any]):
    """A dict whose keys read as attributes: ``hparams.lr`` is ``hparams["lr"]``."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError as missing:
            raise AttributeError(f"no hyperparameter {key!r}; saved: {sorted(self)}") from missing

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def __delattr__(self, key: str) -> None:
        del self[key]


def _init_args(frame: types.FrameType) -> tuple[Any, dict[str, Any]] | None:
    """``(self, {argument: value})`` when ``frame`` runs some class's ``__init__``."""
    local = frame.f_locals
    if frame.f_code.co_name != "__init__" or "__class__" not in local:
        return None
    parameters = list(inspect.signature(local["__class__"].__init__).parameters.values())
    if not parameters:
        return None
    args: dict[str, Any] = {}
    for p in parameters[1:]:
        if p.name not in local:
            continue
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            args.update(local[p.name])
        elif p.kind is not inspect.Parameter.VAR_POSITIONAL:
            args[p.name] = local[p.name]
    return local.get(parameters[0].name), args


def collect_init_args(frame: types.FrameType | None, owner: Any) -> dict[str, Any]:
    """The arguments of every ``__init__`` of ``owner`` on the stack, the innermost (a parent's)
    first, so that the subclass's own values win."""
    levels: list[dict[str, Any]] = []
    while frame is not None:
        found = _init_args(frame)
        if found is not None and found[0] is owner:
            levels.append(found[1])
        elif levels:
            break  # left the chain of constructors
        frame = frame.f_back
    return {name: value for level in levels for name, value in level.items()}


class HyperparametersMixin:
    """``save_hyperparameters``, ``hparams`` and ``hparams_initial``."""

    #: the checkpoint key of the hyperparameters, and of their container's name and type
    #: (Lightning's names, on its LightningModule and LightningDataModule alike)
    CHECKPOINT_HYPER_PARAMS_KEY: ClassVar[str] = HPARAMS_KEY
    CHECKPOINT_HYPER_PARAMS_NAME: ClassVar[str] = "hparams_name"
    CHECKPOINT_HYPER_PARAMS_TYPE: ClassVar[str] = "hparams_type"

    def save_hyperparameters(
        self,
        *args: Any,
        ignore: Sequence[str] | str | None = None,
        frame: types.FrameType | None = None,
        logger: bool = True,
    ) -> None:
        """Store the constructor's arguments in ``self.hparams`` (all of them; the names given in
        ``args``; or one dict / ``Namespace`` given as the only argument), minus ``ignore``.
        ``logger=False`` keeps them out of the loggers."""
        if len(args) == 1 and not isinstance(args[0], str) and not args[0]:
            return  # an empty container
        caller = frame if frame is not None else getattr(inspect.currentframe(), "f_back", None)
        init_args = collect_init_args(caller, self)
        ignored = [ignore] if isinstance(ignore, str) else list(ignore or [])
        init_args = {k: v for k, v in init_args.items() if k not in ignored}
        # Lightning's ``_hparams_name``, which its checkpoints carry beside the values
        name: str | None = "kwargs"
        if not args:
            chosen: Any = init_args
            name = "kwargs" if init_args else None
        elif len(args) == 1 and not isinstance(args[0], str):
            chosen = args[0]
            name = next((k for k, v in init_args.items() if v is chosen), None)
        else:
            names = [a for a in args if isinstance(a, str)]
            unknown = sorted(set(names) - set(init_args))
            if unknown:
                raise MisconfigurationError(
                    f"save_hyperparameters({', '.join(map(repr, names))}): {unknown} are not "
                    f"arguments of {type(self).__name__}.__init__ (arguments: "
                    f"{sorted(init_args)}). Fix: name only constructor arguments."
                )
            chosen = {name: init_args[name] for name in names}
        hparams = self.hparams
        hparams.update(_as_dict(chosen))
        for key in ignored:
            hparams.pop(key, None)
        for key, value in hparams.items():
            if isinstance(value, nn.Module):
                rank_zero_warn(
                    f"save_hyperparameters(): {key!r} is an nn.Module, whose weights the "
                    f"checkpoint already holds. Fix: save_hyperparameters(ignore=[{key!r}]).",
                    DDPKitWarning,
                )
        object.__setattr__(self, "_hparams_name", name)
        object.__setattr__(self, "_log_hyperparams", logger)
        object.__setattr__(self, "_hparams_initial", copy.deepcopy(dict(hparams)))

    @property
    def hparams(self) -> AttributeDict:
        """The saved hyperparameters (mutable)."""
        found = self.__dict__.get("_hparams")
        if found is None:
            found = AttributeDict()
            object.__setattr__(self, "_hparams", found)
        return found

    @property
    def hparams_initial(self) -> AttributeDict:
        """The hyperparameters as ``save_hyperparameters`` stored them (a copy)."""
        return AttributeDict(copy.deepcopy(self.__dict__.get("_hparams_initial", {})))

    @property
    def log_hyperparameters(self) -> bool:
        """Whether the loggers get ``hparams_initial`` (``save_hyperparameters(logger=...)``)."""
        return bool(self.__dict__.get("_log_hyperparams", False))


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, Namespace):
        return dict(vars(value))
    if isinstance(value, Mapping):
        return dict(value)
    raise MisconfigurationError(
        f"save_hyperparameters(<{type(value).__name__}>): pass argument names, a dict or an "
        f"argparse.Namespace."
    )
