"""The warnings of a :class:`Plan`: the modern spelling of a legacy call, and each flag that
was ignored or replaced, said once, in the words of the call."""

from __future__ import annotations

from typing import Any

from ddpkit.connector._modern_call import ambiguity_message, legacy_word_message
from ddpkit.connector._plan import PlanWarning
from ddpkit.connector._probe import Probe
from ddpkit.connector._translate import Request
from ddpkit.plugins.environments._slurm import srun_warning


def plan_warnings(
    req: Request, plan: dict[str, Any], ambiguous: bool, probe: Probe, notebook: str | None
) -> tuple[PlanWarning, ...]:
    """The warnings a plan carries: each says what ran instead of what the call asked for."""
    out: list[PlanWarning] = []
    acc, devs, nodes = plan["accelerator"].value, plan["devices"].value, plan["num_nodes"].value
    if ambiguous:
        out.append(PlanWarning(ambiguity_message(req, acc, devs, nodes, plan["options"])))
    elif req.legacy_words:
        out.append(PlanWarning(legacy_word_message(req, plan["modern_call"])))
    world_size = len(devs) * nodes
    if plan["environment"].value == "local":
        srun = srun_warning(req.call, probe.env, world_size)
        if srun is not None:
            out.append(PlanWarning(srun, deprecation=False))
    if req.unused_gpus is not None:
        out.append(
            PlanWarning(
                f"{req.call}: {req.unused_gpus.source} is ignored because the accelerator is CPU "
                f"({req.accelerator_source}); GPUs will not be used. Fix: drop "
                f"{req.unused_gpus.source}, or pass accelerator='gpu'.",
                deprecation=False,
            )
        )
    if req.ignored_devices is not None:  # Lightning 1.6: the device-specific count wins
        legacy = "num_processes" if req.accelerator == "cpu" else "gpus"
        ignored = f"{req.ignored_devices.source} is ignored; the device count of {legacy} is used"
        out.append(PlanWarning(f"{req.call}: {ignored}, as Lightning 1.6 did. Fix: pass only "
                               f"one of them.", deprecation=False))  # fmt: skip
    if notebook is not None:
        out.append(PlanWarning(notebook, deprecation=False))
    return tuple(out)
