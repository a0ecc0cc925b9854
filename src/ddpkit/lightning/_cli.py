"""``LightningCLI`` as Lightning 1.x scripts call it, built on Lightning 2.x's own.

Lightning 1.3–1.9 had it at ``pytorch_lightning.utilities.cli``; 2.0 moved it to
``pytorch_lightning.cli`` and renamed some arguments. This one is a subclass of 2.x's (parsing,
config files and ``--print_config`` are jsonargparse's through Lightning) that takes 1.x's
arguments and trains ``ddpkit.lightning.Trainer`` (whose signature holds 1.x's keywords, so
``--trainer.num_processes 2`` and ``--trainer.plugins ddp_find_unused_parameters_false`` parse):

- without a subcommand on the command line (``python train.py --trainer.max_epochs 5``), as 1.3
  and 1.4 did: the constructor parses, instantiates, then runs ``prepare_fit_kwargs()``,
  ``before_fit()``, ``fit()`` and ``after_fit()`` — ``trainer.fit(model, datamodule=...)``;
- with one (``python train.py fit --trainer.max_epochs 5``), as 1.5–1.9 did (``run=True``): the
  subcommands of Lightning 2.x, with the stage's own arguments (``test --ckpt_path x.ckpt
  --verbose false``). ``run=False`` parses and instantiates only, in either case. As in 1.x, a
  ``--ckpt_path`` loads the checkpoint's weights, not its hyperparameters, into the model the
  command line describes.

1.x's arguments in 2.x's spelling: ``save_config_filename`` / ``save_config_overwrite`` /
``save_config_multifile`` → ``save_config_kwargs``; ``description``, ``env_prefix``,
``env_parse`` → ``parser_kwargs``; ``seed_everything_default=None`` (1.x's default: no seed) →
``False``. Each given one warns once, naming that spelling.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from pytorch_lightning import cli as lightning_cli
from pytorch_lightning.cli import SaveConfigCallback

from ddpkit.errors import DDPKitDeprecationWarning, MisconfigurationError
from ddpkit.lightning._trainer import Trainer
from ddpkit.utilities._rank_zero import rank_zero_warn

_SUBCOMMANDS = ("fit", "validate", "test", "predict")
#: the 1.x loader keyword of ``ddpkit.lightning.Trainer``'s stage methods (renamed in 1.4)
_LOADERS_1X = {"fit": "train_dataloader", "validate": "val_dataloaders", "test": "test_dataloaders"}
#: 1.x argument → (where 2.x takes it, the key there)
_MOVED = {
    "save_config_filename": ("save_config_kwargs", "config_filename"),
    "save_config_overwrite": ("save_config_kwargs", "overwrite"),
    "save_config_multifile": ("save_config_kwargs", "multifile"),
    "description": ("parser_kwargs", "description"),
    "env_prefix": ("parser_kwargs", "env_prefix"),
    "env_parse": ("parser_kwargs", "default_env"),
}


class Registry(dict[str, type]):
    """Lightning 1.5–1.8's class registries (``@MODEL_REGISTRY``, ``CALLBACK_REGISTRY(cls)``,
    ``OPTIMIZER_REGISTRY.register_classes(module, base)``): they named the classes the CLI could
    pick by ``class_path``. Lightning 2.x's CLI finds every subclass by itself, so registering is
    only kept for the 1.x code that reads a registry back (``names``, ``classes``)."""

    def __call__(self, cls: type | None = None, key: str | None = None, override: bool = False,
                 show_deprecation: bool = True) -> Any:  # fmt: skip
        if cls is None:  # @REGISTRY(key=...) with arguments
            return lambda c: self(c, key=key, override=override)
        name = cls.__name__ if key is None else key
        if not isinstance(name, str):
            raise TypeError(f"Registry key {name!r}: a key is a str, the class's name by default")
        if name not in self or override:
            self[name] = cls
        return cls

    def register_classes(self, module: Any, base_cls: type, override: bool = False) -> None:
        """Register every subclass of ``base_cls`` that ``module`` holds."""
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, base_cls) and value is not base_cls:
                self(value, override=override)

    @property
    def names(self) -> list[str]:
        return list(self)

    @property
    def classes(self) -> tuple[type, ...]:
        return tuple(self.values())

    def __str__(self) -> str:
        return f"Registered objects: {self.names}"


CALLBACK_REGISTRY = Registry()
DATAMODULE_REGISTRY = Registry()
LOGGER_REGISTRY = Registry()
LR_SCHEDULER_REGISTRY = Registry()
MODEL_REGISTRY = Registry()
OPTIMIZER_REGISTRY = Registry()


def _first_argument(args: Any) -> str | None:
    given = sys.argv[1:] if args is None else args
    if isinstance(given, list) and given and isinstance(given[0], str):
        return given[0]
    return None


class LightningCLI(lightning_cli.LightningCLI):
    """Lightning 2.x's ``LightningCLI`` with 1.x's arguments and behaviour (see the module)."""

    def __init__(
        self,
        model_class: Any = None,
        datamodule_class: Any = None,
        save_config_callback: Any = SaveConfigCallback,
        trainer_class: Any = Trainer,
        trainer_defaults: dict[str, Any] | None = None,
        seed_everything_default: bool | int | None = None,
        parser_kwargs: dict[str, Any] | None = None,
        subclass_mode_model: bool = False,
        subclass_mode_data: bool = False,
        args: Any = None,
        run: bool | None = None,
        auto_registry: bool = False,
        **kwargs: Any,
    ) -> None:
        moved: dict[str, dict[str, Any]] = {
            "save_config_kwargs": dict(kwargs.pop("save_config_kwargs", None) or {}),
            "parser_kwargs": dict(parser_kwargs or {}),
        }
        for name, (target, key) in _MOVED.items():
            if name in kwargs:
                moved[target][key] = kwargs.pop(name)
                rank_zero_warn(
                    f"LightningCLI({name}=...): a Lightning 1.x argument; ddpkit passes it as "
                    f"Lightning 2.x's {target}={{{key!r}: ...}}.",
                    DDPKitDeprecationWarning,
                )
        if auto_registry:
            rank_zero_warn(
                "LightningCLI(auto_registry=True): removed in Lightning 2.0, which finds "
                "subclasses without a registry. Fix: drop it.",
                DDPKitDeprecationWarning,
            )
        subcommand = _first_argument(args) in _SUBCOMMANDS
        one_four = run is None and not subcommand  # 1.3–1.4: fit runs in the constructor
        super().__init__(
            model_class,
            datamodule_class,
            save_config_callback=save_config_callback,
            save_config_kwargs=moved["save_config_kwargs"] or None,
            trainer_class=trainer_class,
            trainer_defaults=trainer_defaults,
            seed_everything_default=False
            if seed_everything_default is None
            else seed_everything_default,
            parser_kwargs=moved["parser_kwargs"] or None,
            subclass_mode_model=subclass_mode_model,
            subclass_mode_data=subclass_mode_data,
            args=args,
            run=bool(subcommand if run is None else run),
            **kwargs,
        )
        if one_four:
            self.config = self.config.as_dict()  # 1.3–1.4 parsed into a dict
            self.prepare_fit_kwargs()
            self.before_fit()
            self.fit()
            self.after_fit()

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        """Lightning's, less the Trainer's 1.x loader keywords too (``ddpkit.lightning.Trainer``
        takes ``fit(train_dataloader=...)`` and co.): the loaders come from the data module."""
        found = lightning_cli.LightningCLI.subcommands()
        for name, old in _LOADERS_1X.items():
            found[name] = {*found[name], old}
        return found

    def _parse_ckpt_path(self) -> None:
        """1.x's: the model is built from the command line and the config files only, and
        ``--ckpt_path`` loads its weights when the subcommand runs (Lightning 2.x also reads
        the checkpoint's hyperparameters into the model's arguments first)."""

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        trainer: Any = self.trainer  # None from a 1.4 instantiate_trainer override
        if trainer is None:
            self.trainer = self.__dict__["_ddpkit_trainer"]

    def instantiate_trainer(self, **kwargs: Any) -> Any:
        """Lightning's; the Trainer is also ``self.trainer`` at once, as 1.4's (which returned
        None) left it."""
        trainer = super().instantiate_trainer(**kwargs)
        self.trainer = self.__dict__["_ddpkit_trainer"] = trainer
        return trainer

    def _add_configure_optimizers_method_to_model(self, subcommand: str | None) -> None:
        if type(self).add_configure_optimizers_method_to_model is not (
            LightningCLI.add_configure_optimizers_method_to_model
        ):  # a 1.4 subclass's own: 1.4 called it here
            self.add_configure_optimizers_method_to_model()
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            super()._add_configure_optimizers_method_to_model(subcommand)
        mine = f"`{type(self).__name__}.configure_optimizers`"
        for found in caught:  # 1.4's words: the hook that overrides it
            hook = f"`{type(self).__name__}.add_configure_optimizers_method_to_model`"
            warnings.warn(str(found.message).replace(mine, hook), found.category, stacklevel=2)

    def add_configure_optimizers_method_to_model(self) -> None:
        """1.4's hook: the model's ``configure_optimizers`` from the optimizer and
        lr-scheduler groups added with ``link_to="AUTOMATIC"`` (2.x calls it on its own)."""
        lightning_cli.LightningCLI._add_configure_optimizers_method_to_model(self, self.subcommand)

    def prepare_fit_kwargs(self) -> None:
        """1.4's: ``self.fit_kwargs``, the model and the data module if there is one."""
        if self.model is None:
            raise MisconfigurationError(
                "LightningCLI(): no model to fit. Fix: LightningCLI(YourModule, ...)."
            )
        self.fit_kwargs: dict[str, Any] = {"model": self.model}
        if self.datamodule is not None:
            self.fit_kwargs["datamodule"] = self.datamodule

    def before_fit(self) -> None:
        """1.4's hook: runs before ``fit``."""

    def fit(self, **kwargs: Any) -> None:
        """1.4's: ``trainer.fit(**self.fit_kwargs)``; the ``fit`` subcommand passes its own
        keyword arguments, as Lightning 2.x's CLI does."""
        self.trainer.fit(**(kwargs or self.fit_kwargs))

    def after_fit(self) -> None:
        """1.4's hook: runs after ``fit``."""
