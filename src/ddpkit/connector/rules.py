"""The decisions, one small rule each, and :func:`resolve` that runs them in order.

Every rule is a pure function of the translated :class:`Request`, the :class:`Probe` and the
decisions before it, and returns a :class:`Choice` whose reason names the flag, the rule or the
environment variable that decided it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ddpkit.connector.checks import (
    check_gpu_available,
    check_num_nodes,
    check_precision,
    check_sync_batchnorm,
)
from ddpkit.connector.flags import Flags, Request, translate
from ddpkit.connector.plan import Choice, Plan, PlanWarning
from ddpkit.connector.probe import Probe
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments.base import ClusterEnvironment
from ddpkit.plugins.environments.local import RENDEZVOUS_VARIABLES, LocalEnvironment
from ddpkit.plugins.environments.slurm import SLURMEnvironment, slurm_local_reason, srun_warning
from ddpkit.plugins.environments.torchelastic import TorchElasticEnvironment

__all__ = [
    "ENVIRONMENT_DETECTION",
    "choose_accelerator",
    "choose_devices",
    "choose_environment",
    "choose_launcher",
    "choose_training_type",
    "resolve",
]

#: Who started this process, in order of precedence. The user's own environment instance
#: (``plugins=[MyEnvironment()]``) comes before all of these; LocalEnvironment after all.
ENVIRONMENT_DETECTION: tuple[type[ClusterEnvironment], ...] = (
    # torchrun exports RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK and LOCAL_WORLD_SIZE to each
    # worker. It is checked first: torchrun inside a SLURM allocation is torchrun's job.
    TorchElasticEnvironment,
    # srun exports SLURM_STEP_ID and SLURM_STEP_NUM_TASKS to the tasks of a step; detected for a
    # step of several tasks. A batch script has no step id; a one-task step leaves its ranks to
    # ddpkit (slurm_local_reason says which, in the plan).
    SLURMEnvironment,
)


def choose_accelerator(req: Request, probe: Probe) -> Choice[str]:
    call = req.flags.call()
    if req.accelerator == "gpu":
        check_gpu_available(call, req.accelerator_source, probe.cuda_device_count)
        return Choice("gpu", req.accelerator_source)
    if req.accelerator == "cpu":
        return Choice("cpu", req.accelerator_source)
    if probe.cuda_device_count > 0:
        return Choice("gpu", f"accelerator auto: {probe.cuda_device_count} CUDA device(s) visible")
    return Choice("cpu", "accelerator auto: no CUDA device visible")


def choose_devices(req: Request, accelerator: str, probe: Probe) -> Choice[tuple[int, ...]]:
    """Device indices on this node. GPUs: CUDA ordinals; CPU: one index per process."""
    call = req.flags.call()
    d = req.devices
    if accelerator == "gpu":
        visible = probe.cuda_device_count
        if d is None:
            return Choice((0,), "default: one device")
        if d.kind in ("auto", "all"):
            return Choice(tuple(range(visible)), f"{d.source}: all {visible} visible GPUs")
        if d.kind == "count":
            if d.count == 0:
                raise MisconfigurationError(
                    f"{call}: {d.source} asks for no GPU on a GPU accelerator. "
                    f"Fix: pass accelerator='cpu', or devices ≥ 1."
                )
            if d.count > visible:
                raise MisconfigurationError(
                    f"{call}: {d.source} asks for {d.count} GPUs, but "
                    f"torch.cuda.device_count() = {visible}. Fix: pass devices={visible} "
                    f"or fewer (or devices=-1 for all)."
                )
            return Choice(tuple(range(d.count)), d.source)
        missing = [i for i in d.ids if i >= visible]
        if missing:
            raise MisconfigurationError(
                f"{call}: {d.source} names GPU {missing[0]}, but only ids 0..{visible - 1} "
                f"exist (torch.cuda.device_count() = {visible}). Fix: choose ids below {visible}."
            )
        return Choice(d.ids, d.source)
    if d is None or d.kind == "auto":
        return Choice((0,), f"{d.source}: one CPU process" if d else "default: one process")
    if d.kind == "all":
        return Choice(tuple(range(probe.cpu_count)), f"{d.source}: one process per core")
    if d.kind == "ids":
        raise MisconfigurationError(
            f"{call}: {d.source} lists device ids, but CPU devices are a count of processes. "
            f"Fix: pass devices={d.count}."
        )
    if d.count == 0:
        raise MisconfigurationError(
            f"{call}: {d.source} asks for 0 CPU processes. Fix: pass devices=1 or more."
        )
    return Choice(tuple(range(d.count)), d.source)


def choose_environment(req: Request, env: Mapping[str, str]) -> Choice[str]:
    if req.environment_instance is not None:
        return Choice(
            type(req.environment_instance).__name__,
            f"plugins=[{req.environment_instance!r}]: the user's environment beats detection",
        )
    for cls in ENVIRONMENT_DETECTION:
        if cls.detect(env):
            matched = ", ".join(f"{k}={v}" for k, v in cls.matched_variables(env).items())
            return Choice(cls.name, f"{matched}")
    if "LOCAL_RANK" in env:
        return Choice("local", f"LOCAL_RANK={env['LOCAL_RANK']}: a rank ddpkit's launcher started")
    slurm = slurm_local_reason(env)
    if slurm is not None:
        return Choice("local", slurm)
    if "NODE_RANK" in env:
        given = ", ".join(f"{k}={env[k]}" for k in RENDEZVOUS_VARIABLES if k in env)
        return Choice("local", f"{given}: one node of several; ddpkit starts the ranks of this one")
    return Choice("local", "no torchrun or SLURM variables: ddpkit starts the ranks")


def check_environment(
    call: str,
    req: Request,
    environment: Choice[str],
    env: Mapping[str, str],
    devices: int,
    num_nodes: int,
) -> None:
    """The flags must agree with the launcher that started the ranks (world size, nodes)."""
    instance = req.environment_instance
    if instance is None:
        classes: tuple[type[ClusterEnvironment], ...] = (*ENVIRONMENT_DETECTION, LocalEnvironment)
        known = {cls.name: cls for cls in classes}
        instance = known[environment.value](env)
    instance.validate(devices, num_nodes, call)


def _external(req: Request, environment: Choice[str]) -> bool:
    if req.environment_instance is not None:
        return bool(req.environment_instance.creates_processes_externally)
    return environment.value in ("torchelastic", "slurm")


def choose_training_type(
    req: Request, world_size: int, environment: Choice[str], devices: Choice[tuple[int, ...]]
) -> tuple[Choice[str], bool]:
    """The training type, and whether the ambiguous legacy default (spawn) was applied."""
    call = req.flags.call()
    external = _external(req, environment)
    instance = req.training_type_instance
    if instance is not None:
        if instance.name == "single_device" and world_size > 1:
            raise MisconfigurationError(
                f"{call}: {req.training_type_source} runs one process, but the flags ask for "
                f"world size {world_size}. Fix: pass devices=1, or strategy='ddp'."
            )
        if external and instance.name == "ddp_spawn":
            raise MisconfigurationError(
                f"{call}: {req.training_type_source} spawns ranks, but {environment.value} "
                f"already started every rank ({environment.reason}). "
                f"Fix: pass DDPPlugin(...) with the same options."
            )
        unset = instance.unset_fields()
        filled = f"; ddpkit fills in {', '.join(unset)}" if unset else ""
        return Choice(
            instance.name, f"{req.training_type_source}: the user's instance{filled}"
        ), False
    kind = req.training_type
    if kind is not None:
        if kind == "single_device" and world_size > 1:
            raise MisconfigurationError(
                f"{call}: {req.training_type_source} runs one process, but the flags ask for "
                f"world size {world_size}. Fix: pass devices=1, or strategy='ddp'."
            )
        if external and kind == "ddp_spawn":
            return Choice(
                "ddp",
                f"{req.training_type_source} asks for spawn, but {environment.value} started "
                f"every rank: DDP in each of them, nothing spawned",
            ), False
        return Choice(kind, req.training_type_source), False
    if external and world_size > 1:
        return Choice("ddp", f"{environment.value} started every rank"), False
    if world_size == 1:
        return Choice("single_device", "world size 1"), False
    if req.legacy_default_spawn:
        source = devices.reason
        if req.flags.accelerator == "ddp_cpu":
            source = f"accelerator='ddp_cpu' with {devices.reason}"
        return Choice(
            "ddp_spawn", f"{source}: spawn, the 1.x default for several devices (deprecated)"
        ), True
    return Choice("ddp", f"{devices.reason}: several devices (modern default)"), False


def choose_launcher(
    req: Request, training_type: Choice[str], environment: Choice[str]
) -> Choice[str]:
    if training_type.value == "single_device":
        return Choice("none", "one process: nothing to start")
    if _external(req, environment):
        return Choice("external", f"{environment.value} started every rank")
    if training_type.value == "ddp_spawn":
        return Choice("spawn", "ddp_spawn: torch.multiprocessing spawns every rank")
    return Choice(
        "subprocess", "ddp: rank 0 is this process; it re-runs the command for the others"
    )


def choose_precision(req: Request, accelerator: Choice[str]) -> Choice[str]:
    check_precision(req.flags.call(), req.precision, accelerator.value)
    return Choice(req.precision, req.precision_source)


def resolve(flags: Flags, probe: Probe) -> Plan:
    """Decide everything. Pure: the same flags and probe always give the same plan."""
    call = flags.call()
    req = translate(flags)
    num_nodes = check_num_nodes(call, flags.num_nodes)
    check_sync_batchnorm(call, flags.sync_batchnorm, req.training_type or "")
    accelerator = choose_accelerator(req, probe)
    devices = choose_devices(req, accelerator.value, probe)
    nodes = Choice(num_nodes, "num_nodes" if num_nodes != 1 else "default")
    world_size = len(devices.value) * num_nodes
    environment = choose_environment(req, probe.env)
    check_environment(call, req, environment, probe.env, len(devices.value), num_nodes)
    training_type, ambiguous = choose_training_type(req, world_size, environment, devices)
    launcher = choose_launcher(req, training_type, environment)
    precision = choose_precision(req, accelerator)
    sync_bn = Choice(
        bool(flags.sync_batchnorm), "sync_batchnorm=True" if flags.sync_batchnorm else "default"
    )
    modern = modern_call(req, accelerator.value, devices.value, num_nodes, training_type.value)
    warnings: list[PlanWarning] = []
    if ambiguous:
        warnings.append(
            PlanWarning(_ambiguity_message(call, devices.value, accelerator.value, num_nodes, req))
        )
    elif req.legacy_words:
        warnings.append(
            PlanWarning(
                f"{call}: {', '.join(req.legacy_words)} puts a training type in the accelerator "
                f"flag, which is deprecated. The same run, spelled today: {modern}"
            )
        )
    srun = srun_warning(call, probe.env, world_size) if environment.value == "local" else None
    if srun is not None:
        warnings.append(PlanWarning(srun, deprecation=False))
    if req.unused_gpus is not None:
        warnings.append(
            PlanWarning(
                f"{call}: {req.unused_gpus.source} is ignored because the accelerator is CPU "
                f"({req.accelerator_source}); GPUs will not be used. Fix: drop "
                f"{req.unused_gpus.source}, or pass accelerator='gpu'.",
                deprecation=False,
            )
        )
    return Plan(
        call=call,
        accelerator=accelerator,
        devices=devices,
        num_nodes=nodes,
        training_type=training_type,
        training_type_options=dict(req.training_type_options),
        launcher=launcher,
        environment=environment,
        precision=precision,
        sync_batchnorm=sync_bn,
        modern_call=modern,
        warnings=tuple(warnings),
        accelerator_instance=req.accelerator_instance,
        training_type_instance=req.training_type_instance,
        environment_instance=req.environment_instance,
        precision_instance=req.precision_instance,
    )


def _ambiguity_message(
    call: str, devices: tuple[int, ...], accelerator: str, num_nodes: int, req: Request
) -> str:
    spawn = _spell(accelerator, devices, num_nodes, "'ddp_spawn'", req)
    ddp = _spell(accelerator, devices, num_nodes, "'ddp'", req)
    return (
        f"{call} starts its {len(devices) * num_nodes} ranks with spawn, the 1.x default for "
        f"several devices. That default is deprecated and will become subprocess DDP. "
        f"Pin the launcher you want: {spawn} keeps spawn; {ddp} re-runs the script as "
        f"subprocesses (faster start-up, no pickling)."
    )


def _spell(
    accelerator: str, devices: tuple[int, ...], num_nodes: int, strategy: str | None, req: Request
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
    if plugins:
        parts.append(f"plugins=[{', '.join(repr(p) for p in plugins)}]")
    if req.flags.sync_batchnorm:
        parts.append("sync_batchnorm=True")
    return f"Trainer({', '.join(parts)})"


def modern_call(
    req: Request, accelerator: str, devices: tuple[int, ...], num_nodes: int, training_type: str
) -> str:
    """The same request in today's spelling: accelerator, devices, strategy."""
    strategy: str | None
    if req.training_type_instance is not None:
        strategy = repr(req.training_type_instance)
    elif req.flags.strategy is not None and isinstance(req.flags.strategy, str):
        strategy = repr(req.flags.strategy)
    elif any(isinstance(p, str) for p in req.flags.plugins):
        strategy = repr(next(p for p in req.flags.plugins if isinstance(p, str)))
    elif training_type == "single_device":
        strategy = None
    else:
        strategy = repr(training_type)
    return _spell(accelerator, devices, num_nodes, strategy, req)
