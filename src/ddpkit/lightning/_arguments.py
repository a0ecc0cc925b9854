"""Lightning 1.x's argparse API, for ``ddpkit.lightning.Trainer`` and ``LightningDataModule``.

``add_argparse_args`` / ``from_argparse_args`` / ``parse_argparser`` /
``get_init_arguments_and_types`` as Lightning 1.x's ``pytorch_lightning/utilities/argparse.py``
had them (1.3–1.9; 1.0–1.2 differ only in returning a new parser): one ``--<keyword>`` per
argument of the class's signature whose type includes ``str``, ``int``, ``float`` or ``bool``
(Lightning 2.x removed all of it). The types come from the signature, parsed as 1.x parsed them:

- ``bool``: ``--flag`` alone means True (``nargs="?"``, then :func:`parse_argparser`), or
  ``--flag false``; with ``int`` or ``str`` also in the type, that value;
- ``--gpus`` / ``--tpu_cores``: ``2`` is a count, ``0,1`` a string of ids;
- an ``int`` / ``float`` pair (``--limit_train_batches``, ``--val_check_interval``): ``10`` is an
  int, ``0.5`` a float; ``--track_grad_norm``: a float;
- the first of ``str``, ``int``, ``float`` in the type otherwise: ``--accelerator ddp_cpu``,
  ``--num_processes 2``, ``--plugins ddp_find_unused_parameters_false`` (one name, as in 1.x).

``from_argparse_args`` passes every argument of the signature found in the namespace; each
default asks for nothing, so the Trainer is the one the flags given on the command line ask for,
with the same deprecation warnings as the constructor.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from argparse import ArgumentParser, Namespace, _ArgumentGroup
from ast import literal_eval
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from ddpkit.errors import LightningUsageError

_ALLOWED = (str, int, float, bool)
_IGNORED = ("self", "args", "kwargs")
#: A Trainer's keywords Lightning 2.x kept with another default: the argparse API parses 1.x's
#: (1.4's; 1.x scripts test them, ``if args.max_steps:``), and that value asks for nothing.
TRAINER_1X_DEFAULTS: dict[str, Any] = {
    "accelerator": None,
    "strategy": None,
    "devices": None,
    "max_steps": None,
    "precision": 32,
    "logger": True,
    "num_sanity_val_steps": 2,
    "log_every_n_steps": 50,
    "enable_checkpointing": True,
    "enable_progress_bar": True,
    "enable_model_summary": True,
}
#: Keywords 1.x typed as an int or a float (2.x's type also takes a time string).
_INT_OR_FLOAT = ("val_check_interval",)


def _types(annotation: Any) -> tuple[Any, ...]:
    """The types an annotation is made of, ``Literal`` values by their types, unions flattened."""
    if get_origin(annotation) is Literal:
        return tuple({type(a) for a in get_args(annotation)})
    if get_origin(annotation) in (Union, UnionType):
        return tuple(t for arg in get_args(annotation) for t in _types(arg))
    return (annotation,)


def get_init_arguments_and_types(cls: Any) -> list[tuple[str, tuple[Any, ...], Any]]:
    """``(name, types, default)`` of each argument of ``cls``'s signature."""
    try:  # string annotations (``from __future__ import annotations``) as the types they name
        signature = inspect.signature(cls, eval_str=True)
    except (NameError, TypeError, SyntaxError):  # a name only a type checker can resolve
        signature = inspect.signature(cls)
    return [(name, _types(p.annotation), p.default) for name, p in signature.parameters.items()]


def str_to_bool(value: str) -> bool:
    """1.x's parser for a bool: y/yes/t/true/on/1 or n/no/f/false/off/0, any case."""
    lowered = value.lower()
    if lowered in ("y", "yes", "t", "true", "on", "1"):
        return True
    if lowered in ("n", "no", "f", "false", "off", "0"):
        return False
    raise ValueError(f"invalid truth value {value}")


def _str_to_bool_or_int(value: str) -> bool | int:
    try:
        return str_to_bool(value)
    except ValueError:
        return int(value)


def _str_to_bool_or_str(value: str) -> bool | str:
    try:
        return str_to_bool(value)
    except ValueError:
        return value


def _gpus_type(value: str) -> int | str:
    return value if "," in value else int(value)


def _int_or_float(value: str) -> int | float:
    return float(value) if "." in value else int(value)


def _parser_type(name: str, types: list[Any]) -> Any:
    if name in ("gpus", "tpu_cores"):
        return _gpus_type
    if name == "track_grad_norm":
        return float
    if name in _INT_OR_FLOAT or set(types) == {int, float}:
        return _int_or_float
    if bool not in types:
        return types[0]
    if types == [bool]:
        return str_to_bool
    if int in types:
        return _str_to_bool_or_int
    if str in types:
        return _str_to_bool_or_str
    return next(t for t in types if t is not bool)


def _help(cls: Any) -> dict[str, str]:
    """Each argument's help, from the ``Args:`` block of the class's docstrings."""
    found: dict[str, str] = {}
    for klass in reversed(inspect.getmro(cls)):
        init = vars(klass).get("__init__")
        for doc in (getattr(init, "__doc__", None), klass.__doc__):
            found.update(_docstring_args(doc or ""))
    return found


def _docstring_args(docstring: str) -> dict[str, str]:
    indent, current, parsed = None, "", dict[str, str]()
    for line in docstring.splitlines():
        stripped = line.lstrip()
        depth = len(line) - len(stripped)
        if not stripped:
            continue
        if stripped.startswith(("Args:", "Arguments:", "Parameters:")):
            indent = depth + 4
        elif indent is None:
            continue
        elif depth < indent:
            break
        elif depth == indent and ":" in stripped:
            current, text = stripped.split(":", 1)
            parsed[current] = text.strip()
        elif current:
            parsed[current] += f" {stripped}"
    return parsed


def add_argparse_args(
    cls: Any, parent_parser: ArgumentParser, *, use_argument_group: bool = True
) -> ArgumentParser:
    """One ``--<argument>`` per argument of ``cls`` (see the module), in an argument group named
    for the class (returns ``parent_parser``), or, with ``use_argument_group=False``, in a new
    parser whose parent is ``parent_parser`` (returned; 1.0–1.2 did that). An argument the
    parser already has (a ``--batch_size`` of the script's own) is left as the script made it,
    as 1.x's DataModule did."""
    if isinstance(parent_parser, _ArgumentGroup):
        raise LightningUsageError(  # 1.x's RuntimeError, with its words
            f"{cls.__name__}.add_argparse_args({type(parent_parser).__name__}): Please only "
            f"pass an ArgumentParser instance. Fix: pass the ArgumentParser itself; its "
            f"arguments go in a group of their own."
        )
    if use_argument_group:
        parser: Any = parent_parser.add_argument_group(f"{cls.__module__}.{cls.__qualname__}")
    else:
        parser = ArgumentParser(parents=[parent_parser], add_help=False)
    taken = {action.dest for action in parent_parser._actions}
    helps, ours = _help(cls), _one_x_defaults(cls)
    for name, types, default in get_init_arguments_and_types(cls):
        default = ours.get(name, default)
        allowed = [t for t in _ALLOWED if t in types]
        if name in _IGNORED or name in taken or not allowed:
            continue
        options: dict[str, Any] = {"nargs": "?", "const": True} if bool in allowed else {}
        parser.add_argument(
            f"--{name}",
            dest=name,
            default=None if default is inspect.Parameter.empty else default,
            type=_parser_type(name, allowed),
            help=helps.get(name),
            **options,
        )
    return parent_parser if use_argument_group else parser


def parse_argparser(cls: Any, arg_parser: ArgumentParser | Namespace) -> Namespace:
    """Parse (or take) the arguments; a bool flag given without a value (``None`` from
    ``nargs="?"`` where the default is a bool) becomes True."""
    args = arg_parser.parse_args() if isinstance(arg_parser, ArgumentParser) else arg_parser
    flags = {
        name
        for name, types, default in get_init_arguments_and_types(cls)
        if bool in types and isinstance(default, bool)
    }
    return Namespace(**{k: True if k in flags and v is None else v for k, v in vars(args).items()})


def from_argparse_args(cls: Any, args: Namespace | ArgumentParser, **kwargs: Any) -> Any:
    """``cls(...)`` with the namespace's values of ``cls``'s arguments, ``kwargs`` overriding."""
    if isinstance(args, ArgumentParser):  # the class's own parse_argparser, as 1.x called it
        parse = getattr(cls, "parse_argparser", None)
        args = parse(args) if parse is not None else parse_argparser(cls, args)
    params = vars(args)
    valid = inspect.signature(cls).parameters
    given = {name: params[name] for name in valid if name in params}
    for name, default in _one_x_defaults(cls).items():
        if name in given and given[name] == default and type(given[name]) is type(default):
            del given[name]  # 1.x's default: the Trainer's own asks for the same
    given.update(kwargs)
    return cls(**given)


def _one_x_defaults(cls: Any) -> dict[str, Any]:
    import pytorch_lightning as pl

    return TRAINER_1X_DEFAULTS if isinstance(cls, type) and issubclass(cls, pl.Trainer) else {}


def parse_env_variables(cls: Any, template: str = "PL_%(cls_name)s_%(cls_argument)s") -> Namespace:
    """1.x's: each argument of ``cls`` set in the environment as ``PL_<CLASS>_<ARGUMENT>``, read
    as a Python literal where it is one (``PL_TRAINER_MAX_EPOCHS=3`` is 3), else as the string."""
    found: dict[str, Any] = {}
    for name, _, _ in get_init_arguments_and_types(cls):
        value: Any = os.environ.get(
            template % {"cls_name": cls.__name__.upper(), "cls_argument": name.upper()}
        )
        if value is None or value == "":
            continue
        with contextlib.suppress(ValueError, SyntaxError):  # not a literal: kept as the string
            value = literal_eval(value)
        found[name] = value
    return Namespace(**found)


class ArgparseAPI:
    """Lightning 1.x's argparse class methods, as ``Trainer`` and ``LightningDataModule`` had
    them (a base of both of ddpkit.lightning's): each is this module's function of the same name,
    with the class as ``cls``, reading the class's signature (see the module)."""

    add_argparse_args = classmethod(add_argparse_args)
    # mypy: a "cls" in **kwargs would clash with the bound class (a TypeError, as it always was)
    from_argparse_args = classmethod(from_argparse_args)  # type: ignore[arg-type]
    parse_argparser = classmethod(parse_argparser)
    get_init_arguments_and_types = classmethod(get_init_arguments_and_types)
