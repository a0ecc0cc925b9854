"""``LightningDataModule``: Lightning 2.x's, with what 1.x's had besides.

A subclass of ``pytorch_lightning.LightningDataModule`` — Lightning's Trainer takes it as its own —
with 1.x's class methods ``add_argparse_args`` / ``from_argparse_args`` /
``get_init_arguments_and_types`` (:mod:`ddpkit.lightning._arguments`) and 1.x's constructor
arguments ``train_transforms``, ``val_transforms``, ``test_transforms`` and ``dims`` (1.x kept them
as attributes; each given one warns once, naming the 2.x spelling: an attribute of your own).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl

from ddpkit.errors import DDPKitDeprecationWarning
from ddpkit.lightning import _arguments as arguments
from ddpkit.utilities._rank_zero import rank_zero_warn

_ATTRIBUTES = ("train_transforms", "val_transforms", "test_transforms", "dims")
_STAGES = ("fit", "validate", "test", "predict")
#: The hooks whose calls 1.0–1.5 tracked (``dm.has_setup_fit``, ``dm.has_prepared_data``).
_TRACKED = ("prepare_data", "setup", "teardown")


def _tracked(name: str, hook: Callable[..., Any]) -> Callable[..., Any]:
    """``hook`` recording its calls, as 1.0–1.5's data modules did."""

    @functools.wraps(hook)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        stage = kwargs.get("stage", args[0] if args else None)
        called = self.__dict__.setdefault("_ddpkit_called", set())
        # 1.x: a stage of None counted as fit, validate and test (not predict)
        called.update({(name, s) for s in ((stage,) if stage else (None, *_STAGES[:3]))})
        return hook(self, *args, **kwargs)

    return call


def _has(name: str, stage: str | None) -> property:
    def read(self: Any) -> bool:
        return (name, stage) in self.__dict__.get("_ddpkit_called", ())

    what = f"{name}({stage!r})" if stage else f"{name}()"
    read.__doc__ = f"1.0–1.5: whether {what} ran on this data module."
    return property(read)


class LightningDataModule(pl.LightningDataModule, arguments.ArgparseAPI):
    """``pytorch_lightning.LightningDataModule`` with Lightning 1.x's argparse class methods and
    constructor arguments (see the module)."""

    def __init__(
        self,
        train_transforms: Any = None,
        val_transforms: Any = None,
        test_transforms: Any = None,
        dims: Any = None,
    ) -> None:
        super().__init__()
        given = dict(zip(_ATTRIBUTES, (train_transforms, val_transforms, test_transforms, dims)))
        for name, value in given.items():
            setattr(self, name, value)
            if value is not None:
                rank_zero_warn(
                    f"LightningDataModule({name}=...): removed in Lightning 1.7; ddpkit keeps it "
                    f"as the attribute self.{name}, as 1.x did. Lightning 2.x's spelling: set "
                    f"self.{name} in your own __init__.",
                    DDPKitDeprecationWarning,
                )

    #: 1.0–1.6's constructor arguments, kept as attributes (None until set)
    train_transforms: Any = None
    val_transforms: Any = None
    test_transforms: Any = None
    dims: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _TRACKED:
            if name in vars(cls):
                setattr(cls, name, _tracked(name, vars(cls)[name]))

    def prepare_data(self) -> None:
        """Lightning's: nothing to prepare (1.0–1.5 tracked the call)."""

    def setup(self, stage: str | None = None) -> None:
        """Lightning's, with 1.x's default stage (None: every stage; 1.x tracked the call)."""

    def teardown(self, stage: str | None = None) -> None:
        """Lightning's, with 1.x's default stage (None: every stage; 1.x tracked the call)."""

    prepare_data = _tracked("prepare_data", prepare_data)
    setup = _tracked("setup", setup)
    teardown = _tracked("teardown", teardown)

    has_prepared_data = _has("prepare_data", None)
    has_setup_fit = _has("setup", "fit")
    has_setup_validate = _has("setup", "validate")
    has_setup_test = _has("setup", "test")
    has_setup_predict = _has("setup", "predict")
    has_teardown_fit = _has("teardown", "fit")
    has_teardown_validate = _has("teardown", "validate")
    has_teardown_test = _has("teardown", "test")
    has_teardown_predict = _has("teardown", "predict")

    def size(self, dim: int | None = None) -> Any:
        """1.0–1.6's ``dm.size()``: ``self.dims``, or its entry ``dim``."""
        dims = getattr(self, "dims", None)
        return dims[dim] if dim is not None and dims is not None else dims
