"""The ``ddpkit`` command: what a Trainer's flags will do, what this machine offers, a run's
metrics as a picture, and any script's ranks started and supervised (``ddpkit run``).

Every error names the command as it was typed and ends with a fix; with ``--json`` it is a JSON
object on stdout instead. Either way the exit status is 2. Parsing imports no torch (see
:mod:`ddpkit.cli._parser`); each command imports what it needs when it runs.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import warnings
from collections.abc import Sequence

from ddpkit.cli import _env as env
from ddpkit.cli import _explain as explain
from ddpkit.cli import _plot as plot
from ddpkit.cli import _run as run
from ddpkit.cli._parser import Command, Parser, UsageError, build_parser, usage_fix

__all__ = ["COMMANDS", "console_main", "main", "parser"]

#: Every command, in the order ``ddpkit --help`` lists them.
COMMANDS: list[Command] = [explain.COMMAND, env.COMMAND, plot.COMMAND, run.COMMAND]
#: The exit status of a command whose reader went away: 128 + SIGPIPE, as a shell reports a
#: program that SIGPIPE ended.
_SIGPIPE_STATUS = 141


def parser() -> Parser:
    """The parser of the whole command line."""
    return build_parser(COMMANDS)


def _fail(command: str, problem: str, kind: str, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"error": {"type": kind, "command": command, "message": problem}}))
    else:
        print(f"{command}: {problem}", file=sys.stderr)
    return 2


def _typed(argv: Sequence[str]) -> str:
    """The command line as a shell would take it back, quoted as people quote it: a call with
    single quotes inside goes in double quotes (shlex would write ``'"'"'``)."""
    words = []
    for arg in argv:
        quoted = shlex.quote(arg)
        if quoted != arg and "'" in arg and not any(c in arg for c in '"$`\\!'):
            quoted = f'"{arg}"'
        words.append(quoted)
    return " ".join(words)


def main(argv: Sequence[str] | None = None) -> int:
    from ddpkit.errors import MisconfigurationError

    argv = list(sys.argv[1:] if argv is None else argv)
    command = _typed(["ddpkit", *argv])
    as_json = "--json" in argv
    whole = parser()
    try:
        args, unknown = whole.parse_known_args(argv)
        if unknown:
            chosen = whole.commands.get(args.command or "", whole)
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}", chosen.prog)
    except UsageError as err:
        names = [c.name for c in COMMANDS]
        problem = usage_fix(err.problem, err.prog, whole, names)
        return _fail(command, problem, "UsageError", as_json)
    if args.command is None:
        problem = (
            "no command given. Fix: name one, for instance ddpkit explain --devices 2 "
            "(ddpkit --help lists them)"
        )
        return _fail(command, problem, "UsageError", as_json)
    chosen_run = next(c.run for c in COMMANDS if args.command in (c.name, *c.aliases))
    # The plan shows its warnings as lines of its own; Python's copy of them would say it twice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return chosen_run(args)
        except UsageError as err:  # a command's own check of the numbers
            return _fail(command, f"{err.problem}. Fix: {err.prog} --help", "UsageError", as_json)
        except MisconfigurationError as err:
            return _fail(command, str(err), type(err).__name__, as_json)
        except ModuleNotFoundError as err:
            if err.name != "matplotlib":  # an optional library of ddpkit plot; anything else
                raise  # missing is a broken install, and its traceback says which
            return _fail(command, str(err), type(err).__name__, as_json)


def console_main() -> None:
    """The ``ddpkit`` command (and ``python -m ddpkit``): :func:`main`, then the exit.

    After ``ddpkit run`` the launcher's work is done — its ranks reaped, its scratch removed, its
    report printed — and it leaves without the interpreter's teardown of torch, which it imported
    only to serve the ranks' store: that teardown has nothing to flush and takes 0.3 s on two
    cores, the largest part of the time from a failing rank to the end of the job
    (bench/run_vs_torchrun.py).

    A reader that stops early (``ddpkit explain ... | head``) ends the command quietly with the
    status a shell shows for SIGPIPE (141), as ``cat`` or ``git log`` end, not with a traceback."""
    try:
        try:
            status = main()
        finally:  # --help and --version leave through SystemExit: their output is flushed too
            sys.stdout.flush()
    except BrokenPipeError:
        # Python's own advice (the signal module's "Note on SIGPIPE"): point stdout at devnull so
        # that the interpreter's last flush does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = _SIGPIPE_STATUS
    if "ddpkit._runtime.launch._run_job" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    raise SystemExit(status)
