"""The same request spelled today, and the warnings of a :class:`Plan`: the modern spelling of a
legacy call, and each flag that was ignored or replaced, said once, in the words of the call."""

from __future__ import annotations

from typing import Any

from ddpkit._flag_names import TRAINING_TYPES
from ddpkit.connector._plan import PlanWarning
from ddpkit.connector._probe import Probe
from ddpkit.connector._translate import Request
from ddpkit.plugins.environments._slurm import srun_warning


def registry_name(kind: str, options: dict[str, Any]) -> str:
    """The registry name that builds ``kind`` with ``options``: ``ddp`` and ``ddp_spawn`` mean
    ``find_unused_parameters=False`` today, so 1.x's True needs the longer name
    (``ddp_spawn_find_unused_parameters_true``)."""
    if options.get("find_unused_parameters") is True:
        name = f"{kind}_find_unused_parameters_true"
        if name in TRAINING_TYPES:
            return name
    return kind


def _written_name(req: Request) -> str | None:
    """A registry name the user wrote that already says find_unused_parameters."""
    for value in (req.flags.strategy, *req.flags.plugins):
        if isinstance(value, str) and "find_unused_parameters" in value:
            return value
    return None


def _spell(
    req: Request, accelerator: str, devices: tuple[int, ...], num_nodes: int, strategy: str | None
) -> str:
    parts = [f"accelerator={accelerator!r}"]
    d = req.devices
    if accelerator == "gpu" and d is not None and d.kind == "ids":
        parts.append(f"devices={list(devices)!r}")
    elif accelerator == "gpu" and d is not None and d.kind == "all":
        parts.append("devices=-1")
    elif len(devices) != 1 or d is not None:
        parts.append(f"devices={len(devices)}")
    if num_nodes != 1:
        parts.append(f"num_nodes={num_nodes}")
    if strategy is not None:
        parts.append(f"strategy={strategy}")
    if req.precision != "32-true" and req.precision_instance is None:
        parts.append(f"precision={req.precision!r}")
    plugins = [p for p in (req.environment_instance, req.precision_instance) if p is not None]
    if plugins and req.training_type_instance is None:
        parts.append(f"plugins=[{', '.join(repr(p) for p in plugins)}]")
    if req.sync_batchnorm:
        parts.append("sync_batchnorm=True")
    return f"Trainer({', '.join(parts)})"


def modern_call(
    req: Request,
    accelerator: str,
    devices: tuple[int, ...],
    num_nodes: int,
    training_type: str,
    options: dict[str, Any],
) -> str:
    """The same request in today's spelling: accelerator, devices, strategy (a registry name
    that keeps the options, or the user's own instance)."""
    strategy: str | None
    if req.training_type_instance is not None:
        strategy = repr(req.training_type_instance)
    elif training_type == "single_device" and not isinstance(req.flags.strategy, str):
        strategy = None
    else:
        strategy = repr(_written_name(req) or registry_name(training_type, options))
    return _spell(req, accelerator, devices, num_nodes, strategy)


def ambiguity_message(
    req: Request,
    accelerator: str,
    devices: tuple[int, ...],
    num_nodes: int,
    options: dict[str, Any],
) -> str:
    spawn = _spell(req, accelerator, devices, num_nodes, repr(registry_name("ddp_spawn", options)))
    ddp = _spell(req, accelerator, devices, num_nodes, repr(registry_name("ddp", options)))
    ranks = len(devices) * num_nodes
    return (
        f"{req.call} starts its {ranks} rank{'s' if ranks != 1 else ''} with spawn, the 1.x "
        f"default. That default is deprecated and will become subprocess DDP. Pin the launcher "
        f"you want: {spawn} keeps spawn; {ddp} re-runs the script as subprocesses (faster "
        f"start-up, no pickling)."
    )


def legacy_word_message(req: Request, modern: str) -> str:
    return (
        f"{req.call}: {', '.join(req.legacy_words)} puts a training type in the accelerator "
        f"flag, which is deprecated. The same run, spelled today: {modern}"
    )


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
