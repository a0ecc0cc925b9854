"""The decisions, one small rule each, and :func:`resolve` that runs them in order.

Every rule is a pure function of the translated :class:`Request`, the :class:`Probe` and the
decisions before it, and returns a :class:`Choice` whose reason names the flag, the rule or the
environment variable that decided it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpkit.connector._checks import (
    check_backend,
    check_gpu_available,
    check_precision,
    check_world_size,
)
from ddpkit.connector._flags import Flags
from ddpkit.connector._interactive import FORK_REASON, interactive_launcher
from ddpkit.connector._modern_call import modern_call, plan_warnings
from ddpkit.connector._plan import Choice, Plan
from ddpkit.connector._probe import Probe
from ddpkit.connector._translate import Request, translate
from ddpkit.connector._types import (
    MAX_PROCESSES_PER_NODE,
    AcceleratorName,
    LauncherName,
    TrainingTypeName,
)
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.environments._kubeflow import KubeflowEnvironment
from ddpkit.plugins.environments._local import RENDEZVOUS_VARIABLES, LocalEnvironment
from ddpkit.plugins.environments._lsf import LSFEnvironment
from ddpkit.plugins.environments._mpi import MPIEnvironment
from ddpkit.plugins.environments._slurm import SLURMEnvironment, slurm_local_reason
from ddpkit.plugins.environments._torchelastic import TorchElasticEnvironment

#: Who started this process, in order of precedence. The user's own environment instance
#: (``plugins=[MyEnvironment()]``) comes before all of these; LocalEnvironment after all.
ENVIRONMENT_DETECTION: tuple[type[ClusterEnvironment], ...] = (
    # torchrun (and `ddpkit run`) export RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK and
    # LOCAL_WORLD_SIZE to each worker. It is checked first: torchrun inside a SLURM allocation
    # or an LSF job is torchrun's job.
    TorchElasticEnvironment,
    # LSF's jsrun: LSB_JOBID, LSB_DJOB_RANKFILE, JSM_NAMESPACE_LOCAL_RANK and _SIZE (as in
    # Lightning 2.x). Before MPI: jsrun runs IBM Spectrum MPI, an Open MPI, whose variables its
    # tasks carry too.
    LSFEnvironment,
    # mpirun / mpiexec: OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK (Open MPI) or PMI_RANK/PMI_SIZE/
    # MPI_LOCALRANKID (MPICH's Hydra), world size > 1. Before SLURM, unlike Lightning 2.x: an
    # mpirun inside a SLURM job starts its daemons on the other nodes with srun, so its ranks
    # there carry that srun step's SLURM_STEP_ID and task count (one per node), not theirs.
    # `srun --mpi=pmi2` sets PMI_RANK/PMI_SIZE but no local rank: SLURM's, below.
    MPIEnvironment,
    # srun exports SLURM_STEP_ID and SLURM_STEP_NUM_TASKS to the tasks of a step; detected for a
    # step of several tasks. A batch script has no step id; a one-task step leaves its ranks to
    # ddpkit (slurm_local_reason says which, in the plan).
    SLURMEnvironment,
    # Kubeflow's PyTorchJob: KUBERNETES_PORT, MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and none
    # of torchrun's variables (Lightning 1.x's rule; 2.x detects it no more, see
    # docs/flags.md). Last: only a pod's process has KUBERNETES_PORT and the rest.
    KubeflowEnvironment,
)
#: The environment class of each name a plan holds (``ddpkit env`` reads the variables of one).
ENVIRONMENTS_BY_NAME: dict[str, type[ClusterEnvironment]] = {
    **{cls.name: cls for cls in ENVIRONMENT_DETECTION},
    LocalEnvironment.name: LocalEnvironment,
}


def choose_accelerator(req: Request, probe: Probe) -> Choice[AcceleratorName]:
    if req.accelerator == "gpu":
        check_gpu_available(req.call, req.accelerator_source, probe.cuda_device_count)
        return Choice("gpu", req.accelerator_source)
    if req.accelerator == "cpu":
        return Choice("cpu", req.accelerator_source)
    if probe.cuda_device_count > 0:
        return Choice("gpu", f"accelerator auto: {probe.cuda_device_count} CUDA device(s) visible")
    return Choice("cpu", "accelerator auto: no CUDA device visible")


def _gpu_devices(req: Request, visible: int) -> Choice[tuple[int, ...]]:
    call, d = req.call, req.devices
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
                f"{call}: {d.source} asks for {d.count} GPUs, but torch.cuda.device_count() = "
                f"{visible}. Fix: pass devices={visible} or fewer (or devices=-1 for all)."
            )
        return Choice(tuple(range(d.count)), d.source)
    missing = [i for i in d.ids if i >= visible]
    if missing:
        raise MisconfigurationError(
            f"{call}: {d.source} names GPU {missing[0]}, but only ids 0..{visible - 1} exist "
            f"(torch.cuda.device_count() = {visible}). Fix: choose ids below {visible}."
        )
    return Choice(d.ids, d.source)


def choose_devices(req: Request, accelerator: str, probe: Probe) -> Choice[tuple[int, ...]]:
    """Device indices on this node. GPUs: CUDA ordinals; CPU: one index per process."""
    call, d = req.call, req.devices
    if accelerator == "gpu":
        return _gpu_devices(req, probe.cuda_device_count)
    if d is None or d.kind == "auto":
        return Choice((0,), f"{d.source}: one CPU process" if d else "default: one process")
    if d.kind == "all":
        return Choice(tuple(range(probe.cpu_count)), f"{d.source}: one process per core")
    if d.kind == "ids":
        raise MisconfigurationError(
            f"{call}: {d.source} lists GPU ids, but the accelerator is CPU, whose devices are "
            f"a count of processes. Fix: pass devices={d.count}, or accelerator='gpu'."
        )
    if d.count == 0:
        raise MisconfigurationError(
            f"{call}: {d.source} asks for 0 CPU processes. Fix: pass devices=1 or more."
        )
    if d.count > MAX_PROCESSES_PER_NODE:
        raise MisconfigurationError(
            f"{call}: {d.source} asks for {d.count} processes on this machine "
            f"({probe.cpu_count} cores); ddpkit runs at most {MAX_PROCESSES_PER_NODE} per node. "
            f"Fix: pass devices={probe.cpu_count} (one per core) or another count ≤ "
            f"{MAX_PROCESSES_PER_NODE}."
        )
    return Choice(tuple(range(d.count)), d.source)


def choose_environment(req: Request, env: Mapping[str, str]) -> Choice[str]:
    if req.environment_instance is not None:
        return Choice(
            type(req.environment_instance).__name__,
            f"{req.environment_source}: the user's environment beats detection",
        )
    for cls in ENVIRONMENT_DETECTION:
        if cls.detect(env):
            matched = ", ".join(f"{k}={v}" for k, v in cls.matched_variables(env).items())
            return Choice(cls.name, f"{matched}")
    if "LOCAL_RANK" in env:
        return Choice(
            "local",
            f"LOCAL_RANK={env['LOCAL_RANK']}: one rank of a job its parent started (ddpkit's "
            f"launcher, or the user)",
        )
    slurm = slurm_local_reason(env)
    if slurm is not None:
        return Choice("local", slurm)
    if "NODE_RANK" in env:
        given = ", ".join(f"{k}={env[k]}" for k in RENDEZVOUS_VARIABLES if k in env)
        return Choice("local", f"{given}: one node of several; ddpkit starts the ranks of this one")
    return Choice(
        "local", "no torchrun, SLURM, MPI, LSF or Kubeflow variables: ddpkit starts the ranks"
    )


def built_environment(name: str, probe: Probe) -> ClusterEnvironment:
    """The environment ddpkit builds for the plan's ``name``, reading the probe's snapshot."""
    if name == MPIEnvironment.name:
        return MPIEnvironment(probe.env, mpi4py=probe.mpi4py_available)
    return ENVIRONMENTS_BY_NAME[name](probe.env)


def _single(req: Request, world_size: int) -> None:
    raise MisconfigurationError(
        f"{req.call}: {req.training_type_source} runs one process, but the flags ask for world "
        f"size {world_size}. Fix: pass devices=1, or strategy='ddp'."
    )


def choose_training_type(
    req: Request,
    world_size: int,
    environment: Choice[str],
    external: bool,
    devices: Choice[tuple[int, ...]],
) -> tuple[Choice[TrainingTypeName], bool]:
    """The training type, and whether the ambiguous legacy default (spawn) was applied."""
    instance, kind = req.training_type_instance, req.training_type
    if instance is not None:
        if instance.name in ("single_device", "custom") and world_size > 1:
            _single(req, world_size)
        if external and instance.name == "ddp_spawn":
            raise MisconfigurationError(
                f"{req.call}: {req.training_type_source} spawns ranks, but {environment.value} "
                f"already started every rank ({environment.reason}). Fix: pass DDPPlugin(...) "
                f"with the same options."
            )
        # The value column shows the instance itself: say where it came from, not it again.
        where = req.training_type_source.split("=", 1)[0]
        return Choice(instance.name, f"passed in {where}=, used as given"), False  # type: ignore[arg-type]
    if kind is not None:
        if kind == "single_device" and world_size > 1:
            _single(req, world_size)
        if external and kind == "ddp_spawn":
            return Choice(
                "ddp",
                f"{req.training_type_source} asks for spawn, but {environment.value} started "
                f"every rank: DDP in each of them, nothing spawned",
            ), False
        return Choice(kind, req.training_type_source), False  # type: ignore[arg-type]
    if external and (world_size > 1 or req.is_ddp_cpu):
        return Choice("ddp", f"{environment.value} started every rank"), False
    if req.is_ddp_cpu and len(devices.value) == 1 and world_size > 1:
        return Choice(
            "ddp", "accelerator='ddp_cpu' with one process per node: DDP, nothing to spawn (1.x)"
        ), False
    if req.is_ddp_cpu or (req.legacy_default_spawn and world_size > 1):
        source = (
            f"accelerator='ddp_cpu' with {devices.reason}" if req.is_ddp_cpu else devices.reason
        )
        return Choice("ddp_spawn", f"{source}: spawn, the 1.x default (deprecated)"), True
    if world_size == 1:
        return Choice("single_device", "world size 1"), False
    return Choice("ddp", f"{devices.reason}: several devices (modern default)"), False


def choose_launcher(
    training_type: Choice[TrainingTypeName], external: bool, environment: Choice[str], req: Request
) -> Choice[LauncherName]:
    fork = "fork" in (req.training_type_options.get("start_method"),
                      getattr(req.training_type_instance, "start_method", None))  # fmt: skip
    if training_type.value in ("single_device", "custom"):
        return Choice("none", "one process: nothing to start")
    if external:
        return Choice("external", f"{environment.value} started every rank: ddpkit starts none")
    if training_type.value == "ddp_spawn" and fork:
        return Choice("fork", FORK_REASON)
    if training_type.value == "ddp_spawn":
        return Choice("spawn", "ddp_spawn: torch.multiprocessing spawns every rank")
    return Choice(
        "subprocess", "ddp: rank 0 is this process; it re-runs the command for the others"
    )


def choose_backend(
    req: Request,
    training_type: Choice[TrainingTypeName],
    accelerator: str,
    env: Mapping[str, str],
) -> Choice[str | None]:
    if training_type.value in ("single_device", "custom"):
        return Choice(None, "one process: no process group")
    instance = req.training_type_instance
    given = getattr(instance, "process_group_backend", None)
    if given is not None:
        source = f"{req.training_type_source}.process_group_backend"
        if "," not in given:  # torch's per-device form "cpu:gloo,cuda:nccl" is the user's call
            check_backend(req.call, given, accelerator, source)
        return Choice(given, source)
    if "PL_TORCH_DISTRIBUTED_BACKEND" in env:
        # Lightning 1.x read the backend from this variable; it still works.
        value = env["PL_TORCH_DISTRIBUTED_BACKEND"]
        check_backend(req.call, value, accelerator, "PL_TORCH_DISTRIBUTED_BACKEND")
        return Choice(value.strip().lower(), f"PL_TORCH_DISTRIBUTED_BACKEND={value}")
    default = "nccl" if accelerator == "gpu" else "gloo"
    return Choice(default, f"the {accelerator.upper()} default")


def _options(req: Request, training_type: str, backend: str | None) -> dict[str, Any]:
    """The constructor options of a training type ddpkit builds: the registry name's, then 1.x's
    or 2.x's default for find_unused_parameters, then a backend other than the default."""
    if req.training_type_instance is not None or training_type not in ("ddp", "ddp_spawn"):
        return {}
    options = dict(req.training_type_options)
    options.setdefault("find_unused_parameters", req.legacy_semantics)
    if backend is not None and backend != ("nccl" if req.accelerator == "gpu" else "gloo"):
        options["process_group_backend"] = backend
    return options


def resolve(flags: Flags, probe: Probe) -> Plan:
    """Decide everything. Pure: the same flags and probe always give the same plan."""
    req = translate(flags)
    accelerator = choose_accelerator(req, probe)
    devices = choose_devices(req, accelerator.value, probe)
    num_nodes = req.num_nodes or 1
    nodes = Choice(num_nodes, req.num_nodes_source)
    world_size = check_world_size(req.call, len(devices.value), num_nodes)
    environment = choose_environment(req, probe.env)
    # The user's environment instance, or one built to read the probe's environment.
    env_instance = req.environment_instance or built_environment(environment.value, probe)
    env_instance.validate(len(devices.value), num_nodes, req.call)
    external = bool(env_instance.creates_processes_externally)
    training_type, ambiguous = choose_training_type(req, world_size, environment, external, devices)
    launcher = choose_launcher(training_type, external, environment, req)
    training_type, launcher, notebook = interactive_launcher(
        req, training_type, launcher, probe.interactive
    )
    backend = choose_backend(req, training_type, accelerator.value, probe.env)
    options = _options(req, training_type.value, backend.value)
    if notebook is not None:
        ambiguous = False  # the notebook's line says what runs instead of the 1.x default
        options["start_method"] = "fork"
    check_precision(req.call, req.precision, accelerator.value)
    modern = modern_call(
        req, accelerator.value, devices.value, num_nodes, training_type.value, options
    )
    decided = {
        "accelerator": accelerator, "devices": devices, "num_nodes": nodes,
        "environment": environment, "options": options, "modern_call": modern,
    }  # fmt: skip
    instance = req.training_type_instance
    copies = instance is not None and instance.is_connected
    if copies:
        training_type = Choice(
            training_type.value,
            f"{training_type.reason} (another Trainer uses it already: this one gets a copy)",
        )
    return Plan(
        call=req.call,
        accelerator=accelerator,
        devices=devices,
        num_nodes=nodes,
        training_type=training_type,
        training_type_options=options,
        backend=backend,
        launcher=launcher,
        environment=environment,
        precision=Choice(req.precision, _precision_reason(req)),  # type: ignore[arg-type]
        sync_batchnorm=Choice(req.sync_batchnorm, req.sync_batchnorm_source),
        modern_call=modern,
        warnings=plan_warnings(req, decided, ambiguous, probe, notebook),
        accelerator_instance=req.accelerator_instance,
        training_type_instance=instance,
        copies_instance=copies,
        environment_instance=req.environment_instance,
        precision_instance=req.precision_instance,
    )


#: What each precision means, for a reader who does not know Lightning's names for them.
_PRECISION_WORDS = {
    "32-true": "float32 throughout",
    "64-true": "float64 throughout",
    "16-mixed": "float16 autocast, float32 weights, a gradient scaler",
    "bf16-mixed": "bfloat16 autocast, float32 weights",
}


def _precision_reason(req: Request) -> str:
    meaning = _PRECISION_WORDS.get(req.precision)
    return f"{req.precision_source}: {meaning}" if meaning else req.precision_source
