"""The ``ddpkit`` command: what a Trainer's flags will do, what this machine offers, a run's
metrics as a picture.

Every error names the command as it was typed and ends with a fix; with ``--json`` it is a JSON
object on stdout instead. Either way the exit status is 2.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import shlex
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["main"]

_DESCRIPTION = """\
See what a Trainer's flags will do before training, what ddpkit sees on this machine, and a
run's metrics as a picture."""

_EXAMPLES = """\
examples:
  ddpkit explain --accelerator ddp_cpu --num-processes 2
  ddpkit explain --accelerator gpu --devices 0,1 --json
  ddpkit env
  ddpkit plot runs/spirals/metrics.csv -o curves.png"""

_EXPLAIN = """\
Print the plan that Trainer(...) with these flags makes: one line per decision, with the flag or
environment variable that made it, and the same call in today's spelling. Nothing is started.

Each flag takes what the Trainer keyword of the same name takes. A value is read the way Python
reads it: 2 is an int, [0,1] a list, anything else a string (0,1 and auto included)."""


class _UsageError(Exception):
    """A command line argparse could not take: the problem, and the command to get help."""

    def __init__(self, problem: str, prog: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message, self.prog)


def _value(text: str) -> int | list[int] | str:
    """A flag's text as the Trainer keyword would hold it: ``2`` → 2, ``[0,1]`` → [0, 1],
    anything else unchanged ("0,1", "auto", "abc"), for the connector to accept or explain."""
    stripped = text.strip()
    if re.fullmatch(r"[+-]?\d+", stripped):
        return int(stripped)
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            value = ast.literal_eval(stripped)
        except (ValueError, SyntaxError):
            return text
        if isinstance(value, list) and all(type(v) is int for v in value):
            return value
    return text


def _choices() -> dict[str, str]:
    from ddpkit.connector.translate import ACCELERATOR_NAMES, LEGACY_ACCELERATORS, PRECISIONS
    from ddpkit.plugins.training_type.registry import TRAINING_TYPES

    precisions = sorted(set(PRECISIONS.values()))
    spellings = sorted(set(PRECISIONS) - set(precisions))
    return {
        "accelerator": f"{', '.join(ACCELERATOR_NAMES)}; legacy, also naming the training type: "
        f"{', '.join(sorted(LEGACY_ACCELERATORS))}",
        "strategy": ", ".join(sorted(TRAINING_TYPES)),
        "precision": f"{', '.join(precisions)} (default 32-true); also {', '.join(spellings)}",
    }


def _parser() -> _Parser:
    from ddpkit import __version__

    parser = _Parser(
        prog="ddpkit",
        description=_DESCRIPTION,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version_line(__version__))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    explain = sub.add_parser(
        "explain",
        help="print the plan a Trainer with these flags makes",
        description=_EXPLAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_flags(explain)
    explain.add_argument("--json", action="store_true", help="the plan as JSON, for programs")
    env = sub.add_parser(
        "env",
        help="print what ddpkit sees on this machine",
        description="The ddpkit, torch and Python versions, the CUDA devices torch sees, the "
        "usable cores, and the cluster environment ddpkit detects with the variables that "
        "decided it.",
    )
    env.add_argument("--json", action="store_true", help="the same as JSON, for programs")
    plot = sub.add_parser(
        "plot",
        aliases=["curves"],
        help="draw a run's metrics.csv as curves (needs matplotlib)",
        description="Draw the metrics.csv that a run wrote into its default_root_dir: one "
        "panel per metric, against the step. Needs matplotlib: pip install 'ddpkit[plot]'.",
    )
    plot.add_argument("metrics", metavar="METRICS_CSV", help="for instance runs/x/metrics.csv")
    plot.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="the picture to write; its suffix picks the format (default: beside the CSV, "
        "metrics.png; a folder gets metrics.png inside it)",
    )
    parser.commands = {"explain": explain, "env": env, "plot": plot, "curves": plot}
    return parser


def _add_flags(explain: argparse.ArgumentParser) -> None:
    allowed = _choices()
    flag = explain.add_argument
    flag("--accelerator", type=_value, metavar="NAME", help=allowed["accelerator"])
    flag("--strategy", type=_value, metavar="NAME", help=allowed["strategy"])
    flag(
        "--devices",
        type=_value,
        metavar="N|IDS",
        help="a count (2), device ids (0,1 or [0,1]), -1 for every GPU, or auto",
    )
    flag("--gpus", type=_value, metavar="N|IDS", help="legacy: GPUs, spelled as --devices")
    flag("--num-processes", type=_value, metavar="N", help="legacy: CPU processes per node, ≥ 1")
    flag("--num-nodes", type=_value, metavar="N", help="machines in the job, ≥ 1 (default 1)")
    flag("--precision", type=_value, metavar="P", help=allowed["precision"])
    flag(
        "--plugins",
        nargs="+",
        metavar="NAME",
        help=f"training-type names, as for --strategy: {allowed['strategy']}",
    )
    flag("--sync-batchnorm", action="store_true", help="sync_batchnorm=True")


def _version_line(version: str) -> str:
    import platform

    import torch

    return f"ddpkit {version} (torch {torch.__version__}, Python {platform.python_version()})"


def _flags(args: argparse.Namespace) -> Any:
    """The ``Flags`` of the Trainer call these options spell: only the options given, with
    their values as typed (see :func:`_value`), so that the connector quotes that call."""
    from ddpkit.connector import Flags

    given: dict[str, Any] = {}
    for name in ("accelerator", "strategy", "devices", "gpus", "num_processes", "num_nodes"):
        if getattr(args, name) is not None:
            given[name] = getattr(args, name)
    if args.precision is not None:
        given["precision"] = args.precision
    if args.plugins:
        given["plugins"] = list(args.plugins)
    if args.sync_batchnorm:
        given["sync_batchnorm"] = True
    return Flags.of(**given)


def _explain(args: argparse.Namespace) -> int:
    from ddpkit.connector import Probe, resolve

    plan = resolve(_flags(args), Probe.capture())
    print(plan.to_json() if args.json else plan.explain())
    return 0


def environment_report() -> dict[str, Any]:
    """What the probe sees: CUDA devices, the cluster environment and the variables that
    decided it, interactive or not, versions."""
    import torch

    from ddpkit import __version__
    from ddpkit.connector import Probe
    from ddpkit.connector.flags import Flags
    from ddpkit.connector.rules import ENVIRONMENT_DETECTION, choose_environment
    from ddpkit.connector.translate import translate
    from ddpkit.plugins.environments import ClusterEnvironment, LocalEnvironment

    probe = Probe.capture()
    choice = choose_environment(translate(Flags.of()), probe.env)
    # The detected launcher's variables; for "local", every launcher variable that is set,
    # since those (a SLURM batch step, a one-task srun step, NODE_RANK) decided it too.
    matched: dict[str, str] = {}
    classes: tuple[type[ClusterEnvironment], ...] = (*ENVIRONMENT_DETECTION, LocalEnvironment)
    for cls in classes:
        if cls.name == choice.value:
            matched = cls.matched_variables(probe.env)
    if choice.value == LocalEnvironment.name:
        for cls in ENVIRONMENT_DETECTION:
            matched.update(cls.matched_variables(probe.env))
    return {
        "ddpkit": __version__,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "cuda_available": probe.cuda_available,
        "cuda_device_count": probe.cuda_device_count,
        "cpu_count": probe.cpu_count,
        "interactive": probe.interactive,
        "environment": choice.value,
        "environment_reason": choice.reason,
        "environment_variables": matched,
        "distributed_available": bool(torch.distributed.is_available()),
    }


def _env(args: argparse.Namespace) -> int:
    report = environment_report()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    width = max(len(k) for k in report)
    for key, value in report.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items()) or "(none)"
        print(f"{key:<{width}}  {value}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from ddpkit.utilities.curves import plot_metrics

    print(plot_metrics(args.metrics, args.output).resolve())
    return 0


_COMMANDS = {"explain": _explain, "env": _env, "plot": _plot, "curves": _plot}


def _usage_fix(problem: str, prog: str) -> str:
    """The problem argparse found, with one fix: a did-you-mean where one is close."""
    unknown = re.match(r"unrecognized arguments: (\S+)", problem)
    if unknown:
        options = [o for o in _option_strings(prog) if o.startswith("--")]
        close = difflib.get_close_matches(unknown.group(1).split("=")[0], options, n=1)
        if close:
            return f"unknown option {unknown.group(1)}. Fix: did you mean {close[0]}?"
        return f"unknown option {unknown.group(1)}. Fix: {prog} --help lists the options"
    wrong = re.match(r"argument COMMAND: invalid choice: '([^']*)'", problem)
    if wrong:
        names = [c for c in _COMMANDS if c != "curves"]
        close = difflib.get_close_matches(wrong.group(1), names, n=1)
        fix = f"did you mean ddpkit {close[0]}?" if close else f"use one of {', '.join(names)}"
        return f"{wrong.group(1)!r} is not a ddpkit command. Fix: {fix}"
    return f"{problem}. Fix: {prog} --help says what it takes"


def _option_strings(prog: str) -> list[str]:
    parser = _parser()
    chosen = parser.commands.get(prog.split()[-1], parser)
    return sorted(s for action in chosen._actions for s in action.option_strings)


def _fail(command: str, problem: str, kind: str, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"error": {"type": kind, "command": command, "message": problem}}))
    else:
        print(f"{command}: {problem}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    from ddpkit.errors import MisconfigurationError

    argv = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["ddpkit", *argv])
    as_json = "--json" in argv
    parser = _parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            chosen = parser.commands.get(args.command or "", parser)
            raise _UsageError(f"unrecognized arguments: {' '.join(unknown)}", chosen.prog)
    except _UsageError as err:
        return _fail(command, _usage_fix(err.problem, err.prog), "UsageError", as_json)
    if args.command is None:
        problem = (
            "no command given. Fix: name one, for instance ddpkit explain --devices 2 "
            "(ddpkit --help lists them)"
        )
        return _fail(command, problem, "UsageError", as_json)
    # The plan shows its warnings as lines of its own; Python's copy of them would say it twice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _COMMANDS[args.command](args)
        except MisconfigurationError as err:
            return _fail(command, str(err), type(err).__name__, as_json)
        except ModuleNotFoundError as err:
            if err.name != "matplotlib":  # an optional library of ddpkit plot; anything else
                raise  # missing is a broken install, and its traceback says which
            return _fail(command, str(err), type(err).__name__, as_json)


if __name__ == "__main__":
    raise SystemExit(main())
