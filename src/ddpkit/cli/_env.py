"""``ddpkit env``: what ddpkit sees on this machine."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ddpkit.cli._parser import Command


def _register(sub: Any) -> argparse.ArgumentParser:
    env: argparse.ArgumentParser = sub.add_parser(
        "env",
        help="print what ddpkit sees on this machine",
        description="The ddpkit, torch and Python versions, the CUDA devices torch sees, the "
        "usable cores, and the cluster environment ddpkit detects with the variables that "
        "decided it.",
    )
    env.add_argument("--json", action="store_true", help="the same as JSON, for programs")
    return env


def environment_report() -> dict[str, Any]:
    """What the probe sees: CUDA devices, the cluster environment and the variables that
    decided it, interactive or not, versions."""
    import torch

    from ddpkit.__about__ import __version__
    from ddpkit.connector import Probe
    from ddpkit.connector._flags import Flags
    from ddpkit.connector._rules import (
        ENVIRONMENT_DETECTION,
        ENVIRONMENTS_BY_NAME,
        choose_environment,
    )
    from ddpkit.connector._translate import translate
    from ddpkit.plugins.environments import LocalEnvironment

    probe = Probe.capture()
    choice = choose_environment(translate(Flags.of()), probe.env)
    # The detected launcher's variables; for "local", every launcher variable that is set,
    # since those (a SLURM batch step, a one-task srun step, NODE_RANK) decided it too.
    matched = ENVIRONMENTS_BY_NAME[choice.value].matched_variables(probe.env)
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


def _run(args: argparse.Namespace) -> int:
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


COMMAND = Command("env", (), _register, _run)
