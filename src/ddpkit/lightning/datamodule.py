"""``LightningDataModule``: Lightning 2.x's, with what 1.x's had besides.

A subclass of ``pytorch_lightning.LightningDataModule`` — Lightning's Trainer takes it as its own —
with 1.x's class methods ``add_argparse_args`` / ``from_argparse_args`` /
``get_init_arguments_and_types`` (:mod:`ddpkit.lightning.arguments`) and 1.x's constructor
arguments ``train_transforms``, ``val_transforms``, ``test_transforms`` and ``dims`` (1.x kept them
as attributes; each given one warns once, naming the 2.x spelling: an attribute of your own).
"""

from __future__ import annotations

from argparse import ArgumentParser, Namespace
from typing import Any

import pytorch_lightning as pl

from ddpkit.errors import DDPKitDeprecationWarning
from ddpkit.lightning import arguments
from ddpkit.utilities.rank_zero import rank_zero_warn

__all__ = ["LightningDataModule"]

_ATTRIBUTES = ("train_transforms", "val_transforms", "test_transforms", "dims")


class LightningDataModule(pl.LightningDataModule):
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

    @classmethod
    def add_argparse_args(
        cls, parent_parser: ArgumentParser, *, use_argument_group: bool = True
    ) -> ArgumentParser:
        """Lightning 1.x's: a ``--<argument>`` per argument of the class's ``__init__``."""
        return arguments.add_argparse_args(
            cls, parent_parser, use_argument_group=use_argument_group
        )

    @classmethod
    def from_argparse_args(cls, args: Namespace | ArgumentParser, **kwargs: Any) -> Any:
        """Lightning 1.x's: the data module built from the parsed arguments it takes."""
        return arguments.from_argparse_args(cls, args, **kwargs)

    @classmethod
    def parse_argparser(cls, arg_parser: ArgumentParser | Namespace) -> Namespace:
        """Lightning 1.x's: parse, then a bool flag given without a value is True."""
        return arguments.parse_argparser(cls, arg_parser)

    @classmethod
    def get_init_arguments_and_types(cls) -> list[tuple[str, tuple[Any, ...], Any]]:
        """Lightning 1.x's: ``(name, types, default)`` of each argument of ``__init__``."""
        return arguments.get_init_arguments_and_types(cls)
