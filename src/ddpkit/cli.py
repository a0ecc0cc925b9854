"""``ddpkit explain ...`` and ``ddpkit env``: the connector's decisions, without training.

ddpkit explain --accelerator ddp_cpu --num-processes 2 --plugins ddp_find_unused_parameters_false
ddpkit explain --gpus 0,1 --json
ddpkit env
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]


def _devices(text: str) -> int | str:
    """'2' → 2, '-1' → -1; '0,1', 'auto', '[0, 1]' stay strings (the connector parses them)."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return f"{inner}," if inner and "," not in inner else inner
    try:
        return int(text)
    except ValueError:
        return text


def _precision(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ddpkit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    explain = sub.add_parser("explain", help="print the plan a Trainer with these flags makes")
    explain.add_argument("--accelerator")
    explain.add_argument("--strategy")
    explain.add_argument("--devices", type=_devices)
    explain.add_argument("--gpus", type=_devices)
    explain.add_argument("--num-processes", type=int)
    explain.add_argument("--num-nodes", type=int, default=1)
    explain.add_argument("--precision", type=_precision, default="32-true")
    explain.add_argument(
        "--plugins",
        nargs="*",
        default=[],
        help="training-type registry names, e.g. ddp_find_unused_parameters_false",
    )
    explain.add_argument("--sync-batchnorm", action="store_true")
    explain.add_argument("--json", action="store_true", help="machine-readable output")
    env = sub.add_parser("env", help="print what ddpkit sees on this machine")
    env.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def _explain(args: argparse.Namespace) -> int:
    from ddpkit.connector import Flags, Probe, resolve
    from ddpkit.errors import MisconfigurationError

    flags = Flags.of(
        accelerator=args.accelerator,
        strategy=args.strategy,
        devices=args.devices,
        gpus=args.gpus,
        num_processes=args.num_processes,
        num_nodes=args.num_nodes,
        precision=args.precision,
        plugins=list(args.plugins),
        sync_batchnorm=args.sync_batchnorm,
    )
    try:
        plan = resolve(flags, Probe.capture())
    except MisconfigurationError as err:
        print(f"ddpkit explain: {err}", file=sys.stderr)
        return 2
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The CLI prints the plan's warnings itself, as lines of the plan.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if args.command == "explain":
            return _explain(args)
        return _env(args)


if __name__ == "__main__":
    raise SystemExit(main())
