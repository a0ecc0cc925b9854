"""``ddpkit explain``: the plan a ``Trainer(...)`` makes, before anything runs.

The call is given as the user wrote it (``ddpkit explain "Trainer(accelerator='ddp_cpu',
plugins=[DDPPlugin(find_unused_parameters=False)])"``), found in their script (``ddpkit explain
train.py``: every ``Trainer(...)`` call in it, each with its line), or spelled as flags
(``--accelerator ddp_cpu --num-processes 2``). It is planned for this machine, or for another:
``--cuda-devices 4`` (a GPU box planned from a laptop), ``--slurm nodes=2,ntasks-per-node=4``,
``--torchrun nnodes=2,nproc-per-node=4`` (:mod:`ddpkit.cli._machine`).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from typing import Any

from ddpkit._flag_names import ACCELERATOR_NAMES, LEGACY_ACCELERATORS, PRECISIONS, TRAINING_TYPES
from ddpkit.cli._machine import machine_of
from ddpkit.cli._parser import Command
from ddpkit.cli._trainer_call import CallError, TrainerCall, read_call

_EXPLAIN = """\
Print the plan that a Trainer(...) call makes: one line per decision, with the flag or
environment variable that made it, and the same call in today's spelling. Nothing is started.

The call: as written in the script, quoted whole
  ddpkit explain "Trainer(accelerator='ddp_cpu', plugins=[DDPPlugin(find_unused_parameters=False)])"
or the script itself (every Trainer(...) call in it, each with its line; the script is read, not
run): ddpkit explain train.py. Its values must be literals or ddpkit's plugin and environment
classes. Or as flags: each takes what the Trainer keyword of the same name takes, read the way
Python reads it: 2 is an int, [0,1] a list, anything else a string (0,1 and auto included).

The machine: this one, unless told otherwise. --cuda-devices plans for a machine with that many
GPUs; --slurm for rank 0 of an srun step, with sbatch's options (nodes, ntasks,
ntasks-per-node, gpus-per-node, job-name); --torchrun for rank 0 of torchrun's workers, with its
options (nnodes, nproc-per-node, node-rank). E.g.
  ddpkit explain train.py --cuda-devices 4
  ddpkit explain "Trainer(accelerator='gpu', devices=4, num_nodes=2)" \\
      --slurm nodes=2,ntasks-per-node=4,gpus-per-node=4
  ddpkit explain train.py --torchrun nnodes=2,nproc-per-node=4"""


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
    flag(
        "call",
        nargs="?",
        metavar="CALL|SCRIPT",
        help="the Trainer(...) call as written (quoted), or a script whose calls to plan",
    )
    flag("--cuda-devices", metavar="N", help="plan for a machine with N CUDA devices")
    flag(
        "--slurm",
        metavar="OPTIONS",
        help="plan for rank 0 of an srun step: nodes=2,ntasks-per-node=4 (sbatch's options)",
    )
    flag(
        "--torchrun",
        metavar="OPTIONS",
        help="plan for rank 0 of torchrun: nnodes=2,nproc-per-node=4 (torchrun's options)",
    )
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


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The flags among the options: only those given, with their values as typed (see
    :func:`value`), so that the connector quotes that call."""
    names = (
        "accelerator",
        "strategy",
        "devices",
        "gpus",
        "num_processes",
        "num_nodes",
        "precision",
    )
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    if args.plugins:
        given["plugins"] = list(args.plugins)
    if args.sync_batchnorm:
        given["sync_batchnorm"] = True
    return given


def flags_of(args: argparse.Namespace) -> Any:
    """The ``Flags`` of the Trainer call these options spell."""
    from ddpkit.connector import Flags

    return Flags.of(**_given(args))


def _calls(args: argparse.Namespace) -> list[TrainerCall]:
    """What to plan: the call or script given, else the flags."""
    if args.call is None:
        return [TrainerCall(_given(args))]
    flags = _given(args)
    if flags:
        named = ", ".join(f"--{k.replace('_', '-')}" for k in flags)
        raise CallError(
            f"{args.call!r} and {named}: give the call or its flags, not both. Fix: write the "
            f"flags into the call, e.g. \"Trainer(accelerator='cpu', devices=2)\""
        )
    return read_call(args.call)


def _probe(args: argparse.Namespace) -> tuple[Any, str]:
    """This machine's probe, or the one of the machine the options describe (and its words)."""
    import dataclasses
    import types

    from ddpkit.connector import Probe

    probe = Probe.capture()
    machine = machine_of(args.cuda_devices, args.slurm, args.torchrun)
    if machine is None:
        return probe, ""
    gpus = machine.cuda_devices or 0
    other = dataclasses.replace(
        probe,
        cuda_available=gpus > 0,
        cuda_device_count=gpus,
        env=types.MappingProxyType(dict(machine.env)),
    )
    return other, machine.described


def _run(args: argparse.Namespace) -> int:
    from ddpkit.connector import Flags, resolve

    calls = _calls(args)
    probe, machine = _probe(args)
    plans = [(call, resolve(Flags.of(**call.given), probe)) for call in calls]
    if args.json:
        found = [_as_json(call, plan, machine) for call, plan in plans]
        print(json.dumps(found[0] if len(found) == 1 else found, indent=2, ensure_ascii=False))
        return 0
    blocks = []
    if len(plans) > 1:
        blocks.append(f"{calls[0].where.split(',')[0]}: {len(plans)} Trainer(...) calls, each "
                      f"planned below.")  # fmt: skip
    for call, plan in plans:
        lines = [f"{call.where}: {call.source}"] if call.where else []
        if machine:
            lines.append(f"planned for {machine}")
        lines.append(plan.explain())
        if call.other:
            lines.append(f"  other keywords  {', '.join(call.other)} (not part of the plan)")
        blocks.append("\n".join(lines))
    print("\n\n".join(blocks))
    return 0


def _as_json(call: TrainerCall, plan: Any, machine: str) -> Any:
    data = plan.to_dict()
    if call.where or machine:
        data = {"where": call.where, "machine": machine, "plan": data}
    return data


COMMAND = Command("explain", (), _register, _run)
