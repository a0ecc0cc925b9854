"""Lightning 1.x's argparse API on ddpkit.lightning.Trainer and LightningDataModule, with 1.x's
semantics (Lightning 1.x's pytorch_lightning/utilities/argparse.py is the reference): every
keyword a flag, typed from the signature, each mapped as the constructor maps it."""

from __future__ import annotations

import argparse
import inspect
import warnings
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

from pytorch_lightning.strategies import SingleDeviceStrategy  # noqa: E402

from ddpkit import DDPKitDeprecationWarning, DDPKitWarning  # noqa: E402
from ddpkit._compat_1x.keywords import DEVICE_ROWS, ROWS  # noqa: E402
from ddpkit.lightning import LightningDataModule, SupervisedDDPStrategy, Trainer  # noqa: E402
from ddpkit.lightning._arguments import TRAINER_1X_DEFAULTS  # noqa: E402


def parse(line: str, parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    parser = Trainer.add_argparse_args(parser or argparse.ArgumentParser())
    return Trainer.parse_argparser(parser.parse_args(line.split()))


def build(args: argparse.Namespace, **kwargs: Any) -> tuple[Trainer, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = Trainer.from_argparse_args(args, logger=False, **kwargs)
    return trainer, [str(w.message) for w in caught if issubclass(w.category, DDPKitWarning)]


def test_every_keyword_is_a_flag_with_1x_default() -> None:
    """The signature's default, or 1.x's where Lightning 2.x changed it (1.4's own test,
    ported_1x/test_pl14_trainer_cli.py: max_steps and accelerator parse as None)."""
    args = vars(parse(""))
    signature = inspect.signature(Trainer).parameters
    skipped = {"callbacks", "logger"}  # no str/int/float/bool in their types (logger: bool only)
    for name, parameter in signature.items():
        if name in args:
            assert args[name] == TRAINER_1X_DEFAULTS.get(name, parameter.default), name
    assert args["max_steps"] is None and args["accelerator"] is None
    # Every 1.x keyword of the table and every Lightning 2.x keyword with a plain type.
    assert {n for n, r in {**ROWS, **DEVICE_ROWS}.items() if r.is_1x and not r.kept} <= set(args)
    assert {"max_epochs", "devices", "accelerator", "plugins", "precision"} <= set(args)
    assert "callbacks" not in args and skipped - {"logger"} <= set(signature) - set(args)


def test_the_defaults_build_the_same_trainer_as_no_flags_without_a_word() -> None:
    trainer, messages = build(parse(""))
    assert messages == []
    assert type(trainer.strategy) is SingleDeviceStrategy and trainer.plan is None


@pytest.mark.parametrize(
    ("line", "kwargs", "launcher", "unused"),
    [
        (
            "--accelerator ddp_cpu --num_processes 2",
            {"accelerator": "ddp_cpu", "num_processes": 2},
            "spawn",
            True,
        ),
        (
            "--num_processes 2 --plugins ddp_find_unused_parameters_false",
            {"num_processes": 2, "plugins": "ddp_find_unused_parameters_false"},
            "subprocess",
            False,
        ),
        (
            "--accelerator ddp --num_processes 2",
            {"accelerator": "ddp", "num_processes": 2},
            "subprocess",
            True,
        ),
    ],
)
def test_1x_device_flags_resolve_as_the_constructor_resolves_them(
    line: str, kwargs: dict[str, Any], launcher: str, unused: bool
) -> None:
    trainer, messages = build(parse(line + " --max_epochs 3"))
    assert trainer.plan is not None and trainer.plan.launcher.value == launcher
    assert trainer.plan.world_size == 2 and trainer.max_epochs == 3
    assert type(trainer.strategy) is SupervisedDDPStrategy
    assert trainer.strategy._ddp_kwargs.get("find_unused_parameters", False) is unused
    # The same one device warning as Trainer(...) with these keywords.
    with pytest.warns(DDPKitDeprecationWarning) as record:
        direct = Trainer(logger=False, max_epochs=3, **kwargs)
    assert [m for m in messages if "device flags" in m] == [
        str(w.message) for w in record if "device flags" in str(w.message)
    ]
    assert direct.lightning_call == trainer.lightning_call


@pytest.mark.parametrize(
    ("line", "name", "value"),
    [
        ("--gpus 2", "gpus", 2),  # a count
        ("--gpus 0,1", "gpus", "0,1"),  # ids
        ("--tpu_cores 8", "tpu_cores", 8),
        ("--limit_train_batches 10", "limit_train_batches", 10),  # int: batches
        ("--limit_train_batches 0.5", "limit_train_batches", 0.5),  # float: a fraction
        ("--val_check_interval 0.25", "val_check_interval", 0.25),
        ("--val_check_interval 100", "val_check_interval", 100),
        ("--track_grad_norm 2", "track_grad_norm", 2.0),
        ("--deterministic", "deterministic", True),  # a bool flag alone
        ("--enable_checkpointing false", "enable_checkpointing", False),
        ("--fast_dev_run", "fast_dev_run", True),  # bool or int
        ("--fast_dev_run 3", "fast_dev_run", 3),
        ("--auto_lr_find my_lr", "auto_lr_find", "my_lr"),  # bool or str
        ("--auto_lr_find true", "auto_lr_find", True),
        ("--weights_summary full", "weights_summary", "full"),
        ("--precision 16", "precision", "16"),
        (
            "--plugins ddp_find_unused_parameters_false",
            "plugins",
            "ddp_find_unused_parameters_false",
        ),
        ("--max_steps 5", "max_steps", 5),
    ],
)
def test_a_value_is_parsed_as_1x_parsed_it(line: str, name: str, value: Any) -> None:
    parsed = getattr(parse(line), name)
    assert parsed == value and type(parsed) is type(value)


def test_the_scripts_own_arguments_and_kwargs_win() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max_epochs", type=int, default=7)  # the script's own, kept as it is
    args = parse("--max_epochs 2 --gpus 0", parser)
    assert args.max_epochs == 2
    trainer, _ = build(args, max_epochs=4)
    assert trainer.max_epochs == 4


def test_use_argument_group_false_returns_a_new_parser_as_1_2_did() -> None:
    parent = argparse.ArgumentParser(add_help=False)
    parser = Trainer.add_argparse_args(parent, use_argument_group=False)
    assert parser is not parent
    assert parser.parse_args(["--num_processes", "2"]).num_processes == 2


def test_default_attributes_and_the_types() -> None:
    defaults = Trainer.default_attributes()
    assert defaults["weights_summary"] == "top" and defaults["max_steps"] == -1
    assert defaults["supervise"] is None
    types = {n: t for n, t, _ in Trainer.get_init_arguments_and_types()}
    assert int in types["num_processes"] and str in types["gpus"] and int in types["gpus"]


class Data(LightningDataModule):
    def __init__(self, data_dir: str = "data", batch_size: int = 32, normalize: bool = False,
                 *args: Any, **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.data_dir, self.batch_size, self.normalize = data_dir, batch_size, normalize


def test_a_data_module_gets_the_same_api() -> None:
    parser = Data.add_argparse_args(argparse.ArgumentParser())
    parser = Trainer.add_argparse_args(parser)
    args = parser.parse_args(["--batch_size", "8", "--normalize", "--num_processes", "2"])
    data = Data.from_argparse_args(args)
    assert (data.data_dir, data.batch_size, data.normalize) == ("data", 8, True)
    assert isinstance(data, pl.LightningDataModule)
    assert {n for n, _, _ in Data.get_init_arguments_and_types()} >= {"data_dir", "batch_size"}


def test_a_data_module_keeps_1x_constructor_arguments() -> None:
    with pytest.warns(DDPKitDeprecationWarning, match=r"LightningDataModule\(dims=\.\.\.\)"):
        data = LightningDataModule(dims=(1, 28, 28))
    assert data.dims == (1, 28, 28) and data.train_transforms is None
