"""``ddpkit explain``: the plan a ``Trainer(...)`` with these flags makes, before anything runs."""

from __future__ import annotations

import argparse
import ast
import re
from typing import Any

from ddpkit.cli.parser import Command
from ddpkit.spellings import ACCELERATOR_NAMES, LEGACY_ACCELERATORS, PRECISIONS, TRAINING_TYPES

__all__ = ["COMMAND", "flags_of", "value"]

_EXPLAIN = """\
Print the plan that Trainer(...) with these flags makes: one line per decision, with the flag or
environment variable that made it, and the same call in today's spelling. Nothing is started.

Each flag takes what the Trainer keyword of the same name takes. A value is read the way Python
reads it: 2 is an int, [0,1] a list, anything else a string (0,1 and auto included)."""


def value(text: str) -> int | list[int] | str:
    """A flag's text as the Trainer keyword would hold it: ``2`` → 2, ``[0,1]`` → [0, 1],
    anything else unchanged ("0,1", "auto", "abc"), for the connector to accept or explain."""
    stripped = text.strip()
    if re.fullmatch(r"[+-]?\d+", stripped):
        return int(stripped)
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            parsed = ast.literal_eval(stripped)
        except (ValueError, SyntaxError):
            return text
        if isinstance(parsed, list) and all(type(v) is int for v in parsed):
            return parsed
    return text


def _choices() -> dict[str, str]:
    precisions = sorted(set(PRECISIONS.values()))
    spellings = sorted(set(PRECISIONS) - set(precisions))
    return {
        "accelerator": f"{', '.join(ACCELERATOR_NAMES)}; legacy, also naming the training type: "
        f"{', '.join(sorted(LEGACY_ACCELERATORS))}",
        "strategy": ", ".join(sorted(TRAINING_TYPES)),
        "precision": f"{', '.join(precisions)} (default 32-true); also {', '.join(spellings)}",
    }


def _register(sub: Any) -> argparse.ArgumentParser:
    explain: argparse.ArgumentParser = sub.add_parser(
        "explain",
        help="print the plan a Trainer with these flags makes",
        description=_EXPLAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    allowed = _choices()
    flag = explain.add_argument
    flag("--accelerator", type=value, metavar="NAME", help=allowed["accelerator"])
    flag("--strategy", type=value, metavar="NAME", help=allowed["strategy"])
    flag(
        "--devices",
        type=value,
        metavar="N|IDS",
        help="a count (2), device ids (0,1 or [0,1]), -1 for every GPU, or auto",
    )
    flag("--gpus", type=value, metavar="N|IDS", help="legacy: GPUs, spelled as --devices")
    flag("--num-processes", type=value, metavar="N", help="legacy: CPU processes per node, ≥ 1")
    flag("--num-nodes", type=value, metavar="N", help="machines in the job, ≥ 1 (default 1)")
    flag("--precision", type=value, metavar="P", help=allowed["precision"])
    flag(
        "--plugins",
        nargs="+",
        metavar="NAME",
        help=f"training-type names, as for --strategy: {allowed['strategy']}",
    )
    flag("--sync-batchnorm", action="store_true", help="sync_batchnorm=True")
    flag("--json", action="store_true", help="the plan as JSON, for programs")
    return explain


def flags_of(args: argparse.Namespace) -> Any:
    """The ``Flags`` of the Trainer call these options spell: only the options given, with
    their values as typed (see :func:`value`), so that the connector quotes that call."""
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


def _run(args: argparse.Namespace) -> int:
    from ddpkit.connector import Probe, resolve

    plan = resolve(flags_of(args), Probe.capture())
    print(plan.to_json() if args.json else plan.explain())
    return 0


COMMAND = Command("explain", (), _register, _run)
