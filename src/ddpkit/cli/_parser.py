"""The ``ddpkit`` command line, parsed: the parser of every command, and usage errors with a fix.

Imports no torch: ``--version``, ``--help`` and a mistyped command line answer at once; a
command's own module imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, NoReturn

from ddpkit.__about__ import __version__

_DESCRIPTION = """\
See what a Trainer's flags will do before training, what ddpkit sees on this machine, a run's
metrics as a picture; start any script's ranks under ddpkit's supervision."""

_EXAMPLES = """\
examples:
  ddpkit explain --accelerator ddp_cpu --num-processes 2
  ddpkit explain --accelerator gpu --devices 0,1 --json
  ddpkit env
  ddpkit plot runs/spirals/metrics.csv -o curves.png
  ddpkit run --nproc-per-node 2 train.py --lr 0.1"""


class UsageError(Exception):
    """A command line argparse could not take: the problem, and the command to get help."""

    def __init__(self, problem: str, prog: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """argparse, with errors raised (for :func:`usage_fix`) instead of printed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog)


@dataclass(frozen=True)
class Command:
    """One ``ddpkit`` command: how its options are declared and what running it does."""

    name: str
    aliases: tuple[str, ...]
    #: adds the command's parser to the subparsers and returns it
    register: Callable[[Any], argparse.ArgumentParser]
    #: runs the parsed command; returns the exit status
    run: Callable[[argparse.Namespace], int]


def version_line() -> str:
    """``ddpkit 0.1.0 (torch 2.13.0+cpu, Python 3.11.7)``, read from the installed distributions
    (importing torch to ask it would cost a second)."""
    import platform

    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    return f"ddpkit {__version__} (torch {torch}, Python {platform.python_version()})"


def build_parser(commands: list[Command]) -> Parser:
    parser = Parser(
        prog="ddpkit",
        description=_DESCRIPTION,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in commands:
        chosen = command.register(sub)
        for name in (command.name, *command.aliases):
            parser.commands[name] = chosen
    return parser


def usage_fix(problem: str, prog: str, parser: Parser, names: list[str]) -> str:
    """The problem argparse found, with one fix: a did-you-mean where one is close."""
    unknown = re.match(r"unrecognized arguments: (\S+)", problem)
    if unknown:
        chosen = parser.commands.get(prog.split()[-1], parser)
        options = sorted(
            s for action in chosen._actions for s in action.option_strings if s.startswith("--")
        )
        close = difflib.get_close_matches(unknown.group(1).split("=")[0], options, n=1)
        if close:
            return f"unknown option {unknown.group(1)}. Fix: did you mean {close[0]}?"
        return f"unknown option {unknown.group(1)}. Fix: {prog} --help lists the options"
    wrong = re.match(r"argument COMMAND: invalid choice: '([^']*)'", problem)
    if wrong:
        close = difflib.get_close_matches(wrong.group(1), names, n=1)
        fix = f"did you mean ddpkit {close[0]}?" if close else f"use one of {', '.join(names)}"
        return f"{wrong.group(1)!r} is not a ddpkit command. Fix: {fix}"
    return f"{problem}. Fix: {prog} --help says what it takes"
