"""The machine ``ddpkit explain`` plans for, when it is not this one: a GPU box planned from a
laptop (``--cuda-devices 4``), a task of a SLURM job (``--slurm nodes=2,ntasks-per-node=4``),
a worker of torchrun (``--torchrun nnodes=2,nproc-per-node=4``).

Each option is spelled as its tool spells it: ``--slurm`` takes sbatch/srun's options and
``--torchrun`` torchrun's, with or without their dashes, ``-`` or ``_``, separated by commas or
spaces (``--slurm "--nodes=2 --ntasks-per-node=4"`` works too). The machine they describe is
the process that runs rank 0 there: its environment holds the variables SLURM or torchrun would
set and nothing of this machine's, so the plan is the same wherever it is made.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from ddpkit.errors import MisconfigurationError

_SLURM_KEYS = ("nodes", "ntasks", "ntasks-per-node", "gpus-per-node", "job-name")
_TORCHRUN_KEYS = ("nnodes", "nproc-per-node", "node-rank")


class MachineError(MisconfigurationError):
    """An option of ``--slurm`` / ``--torchrun`` / ``--cuda-devices`` that cannot be read."""


def parse_options(flag: str, text: str, keys: tuple[str, ...]) -> dict[str, str]:
    """``"nodes=2,ntasks-per-node=4"`` (or ``"--nodes=2 --ntasks_per_node 4"``) as a dict with
    the tool's own key spelling."""
    words = [w for w in re.split(r"[,\s]+", text.strip()) if w]
    options: dict[str, str] = {}
    rest = iter(words)
    for word in rest:
        key, sep, value = word.lstrip("-").partition("=")
        key = key.replace("_", "-").lower()
        if not sep:  # "--nodes 2": the value is the next word
            value = next(rest, None)
            if value is None:
                raise MachineError(
                    f"{flag} {text!r}: {key} has no value. Fix: {flag} {keys[0]}=2,{keys[1]}=4"
                )
        if key not in keys:
            close = difflib.get_close_matches(key, keys, n=1)
            fix = f"did you mean {close[0]}?" if close else f"use {', '.join(keys)}"
            raise MachineError(f"{flag} {text!r}: {key} is not one of its options. Fix: {fix}")
        options[key] = value
    return options


def _count(flag: str, key: str, value: str, minimum: int = 1) -> int:
    if not re.fullmatch(r"\d+", value.strip()) or int(value) < minimum:
        raise MachineError(
            f"{flag} {key}={value}: must be a whole number ≥ {minimum}. "
            f"Fix: {key}={max(minimum, 2)}"
        )
    return int(value)


@dataclass(frozen=True)
class Machine:
    """What a probe of that machine would see."""

    cuda_devices: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: 'a machine with 4 CUDA devices, as task 0 of SLURM job step of 8 (2 nodes × 4)'
    described: str = ""


def _slurm(text: str) -> tuple[dict[str, str], int | None, str]:
    flag = "--slurm"
    opts = parse_options(flag, text, _SLURM_KEYS)
    nodes = _count(flag, "nodes", opts.get("nodes", "1"))
    if "ntasks-per-node" in opts:
        per_node = _count(flag, "ntasks-per-node", opts["ntasks-per-node"])
        tasks = _count(flag, "ntasks", opts["ntasks"]) if "ntasks" in opts else per_node * nodes
    else:
        tasks = _count(flag, "ntasks", opts.get("ntasks", str(nodes)))
        per_node = tasks // nodes
    if tasks != per_node * nodes:
        raise MachineError(
            f"{flag} {text!r}: ntasks={tasks} does not share out evenly over nodes={nodes}. "
            f"Fix: ntasks={per_node * nodes or nodes} (or ntasks-per-node=N)"
        )
    gpus = (
        _count(flag, "gpus-per-node", opts["gpus-per-node"], 0) if "gpus-per-node" in opts else None
    )
    hosts = "node1" if nodes == 1 else f"node[1-{nodes}]"
    per = str(per_node) if nodes == 1 else f"{per_node}(x{nodes})"
    env = {
        "SLURM_JOB_ID": "1000",
        "SLURM_JOB_NAME": opts.get("job-name", "train"),
        "SLURM_NTASKS": str(tasks),
        "SLURM_NNODES": str(nodes),
        "SLURM_NODELIST": hosts,
        "SLURM_TASKS_PER_NODE": per,
        # srun's step: what makes its tasks the ranks (sbatch's batch step has none)
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NUM_TASKS": str(tasks),
        "SLURM_STEP_NUM_NODES": str(nodes),
        "SLURM_STEP_NODELIST": hosts,
        "SLURM_STEP_TASKS_PER_NODE": per,
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0",
    }
    what = f"task 0 of an srun step of {tasks} ({nodes} node{'s' * (nodes > 1)} × {per_node})"
    return env, gpus, what


def _torchrun(text: str) -> tuple[dict[str, str], str]:
    flag = "--torchrun"
    opts = parse_options(flag, text, _TORCHRUN_KEYS)
    if ":" in opts.get("nnodes", ""):
        raise MachineError(
            f"{flag} nnodes={opts['nnodes']}: an elastic range has no one world size to plan "
            f"for. Fix: nnodes=N, the number the job starts with"
        )
    nodes = _count(flag, "nnodes", opts.get("nnodes", "1"))
    per_node = _count(flag, "nproc-per-node", opts.get("nproc-per-node", "1"))
    node = _count(flag, "node-rank", opts.get("node-rank", "0"), 0)
    if node >= nodes:
        raise MachineError(
            f"{flag} node-rank={node}: the nodes are numbered 0 to {nodes - 1}. "
            f"Fix: node-rank={nodes - 1} or less"
        )
    rank = node * per_node
    env = {
        "RANK": str(rank),
        "LOCAL_RANK": "0",
        "WORLD_SIZE": str(nodes * per_node),
        "LOCAL_WORLD_SIZE": str(per_node),
        "GROUP_RANK": str(node),
        "ROLE_RANK": str(rank),
        "MASTER_ADDR": "127.0.0.1" if nodes == 1 else "node1",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "none",
        "TORCHELASTIC_RESTART_COUNT": "0",
    }
    shape = f"{nodes} node{'s' * (nodes > 1)} × {per_node}"
    what = f"rank {rank} of torchrun's {nodes * per_node} ({shape})"
    return env, what


def machine_of(cuda_devices: str | None, slurm: str | None, torchrun: str | None) -> Machine | None:
    """The machine the options describe; None when none was given (plan for this one)."""
    if cuda_devices is None and slurm is None and torchrun is None:
        return None
    if slurm is not None and torchrun is not None:
        raise MachineError(
            "--slurm and --torchrun: a rank is started by one of them. Fix: pass one (torchrun "
            "inside an srun step: --torchrun alone, its variables win)"
        )
    env: dict[str, str] = {}
    gpus: int | None = None
    started = ""
    if slurm is not None:
        env, gpus, started = _slurm(slurm)
    elif torchrun is not None:
        env, started = _torchrun(torchrun)
    if cuda_devices is not None:
        gpus = _count("--cuda-devices", "N", cuda_devices, 0)
    devices = "no CUDA device" if not gpus else f"{gpus} CUDA device{'s' * (gpus > 1)}"
    described = f"a machine with {devices}" + (f", as {started}" if started else "")
    return Machine(cuda_devices=gpus, env=env, described=described)
