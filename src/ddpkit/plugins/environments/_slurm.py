"""SLURM's srun started every rank.

Which SLURM processes are ranks srun started, as measured on a real cluster (slurm-wlm 22.05;
the variable sets are in tests/plugins/environments/slurm_variables.json):

=====================================  =======================  ===============  ==============
process                                SLURM_STEP_ID            tasks in step    ddpkit
=====================================  =======================  ===============  ==============
``srun --ntasks=2 python train.py``    0                        2                SLURM's ranks
``srun -n2 bash -c 'python ...'``      0 (job name ``bash``)    2                SLURM's ranks
``salloc -n2 srun -n2 python ...``     0 (job name              2                SLURM's ranks
                                       ``interactive``)
``srun --pty bash``, then ``python``   0                        1                starts ranks
``srun --ntasks=1 python train.py``    0                        1                starts ranks
batch script of ``sbatch --ntasks=2``  unset (PROCID=0, NTASKS  —                starts ranks
                                       =2: looks like rank 0)
``salloc -n2`` shell                   unset                    —                starts ranks
=====================================  =======================  ===============  ==============

So the tell is the job *step*: srun sets ``SLURM_STEP_ID`` and ``SLURM_STEP_NUM_TASKS`` for the
tasks it starts. The job name is no tell (it is the executable's name unless ``--job-name`` was
given: ``bash`` for wrapped launches, ``interactive`` for every step inside ``salloc``), and
``SLURM_NTASKS`` alone is the allocation's count, which the batch script sees too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ExternalEnvironment

log = logging.getLogger(__name__)

# A bracket range of a compressed host list: "[01-03,7]".
_BRACKET = re.compile(r"\[([^\]]*)\]")
# One entry of a compressed tasks-per-node list: "2(x3)" is three nodes with two tasks.
_TASKS = re.compile(r"^([0-9]+)(?:\(x([0-9]+)\))?$")


def _is_count(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts '²', which ``int`` refuses."""
    return text.isascii() and text.isdigit()


def _split_top_level(text: str) -> list[str]:
    """Split on the commas and spaces that are not inside brackets: ``"a[1,2],b c"`` →
    ``a[1,2]``, ``b``, ``c`` (Lightning 1.x read a space-separated list too)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char == "["
        depth -= char == "]"
        if (char == "," or char.isspace()) and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _expand_range(spec: str, nodelist: str) -> list[str]:
    values: list[str] = []
    for part in spec.split(","):
        lo, sep, hi = (side.strip() for side in part.partition("-"))
        if not _is_count(lo) or (sep and not _is_count(hi)):
            raise MisconfigurationError(
                f"SLURM_NODELIST={nodelist!r}: cannot read the range [{spec}]. Fix: set "
                f"MASTER_ADDR to rank 0's host, so the list need not be read."
            )
        if not sep:
            values.append(lo)
            continue
        # Zero padding comes from the lower bound: "[08-10]" is 08 09 10.
        values.extend(f"{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1))
    return values


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand SLURM's compressed host list, in SLURM's order.

    ``"n[01-03,7],gpu1"`` → ``n01 n02 n03 n7 gpu1``; ``"r[1-2]-n[1-2]"`` → ``r1-n1 r1-n2 r2-n1
    r2-n2`` (what ``scontrol show hostnames`` prints).
    """
    hosts: list[str] = []
    for entry in _split_top_level(nodelist):
        names = [""]
        pos = 0
        for match in _BRACKET.finditer(entry):
            literal = entry[pos : match.start()]
            values = _expand_range(match.group(1), nodelist)
            names = [f"{n}{literal}{v}" for n in names for v in values]
            pos = match.end()
        hosts.extend(f"{n}{entry[pos:]}" for n in names)
    return hosts


def expand_tasks_per_node(spec: str) -> list[int]:
    """Expand SLURM's compressed tasks per node: ``"2(x3),1"`` → ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for entry in _split_top_level(spec):
        match = _TASKS.match(entry)
        if match is None:
            raise MisconfigurationError(
                f"SLURM_TASKS_PER_NODE={spec!r}: cannot read {entry!r} (SLURM writes counts "
                f"such as '2(x3),1'). Fix: start the step with srun, which sets it."
            )
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def _first(env: Mapping[str, str], *keys: str) -> tuple[str, str] | None:
    """The first of ``keys`` that is set, with its value."""
    return next(((key, env[key]) for key in keys if key in env), None)


def _step_tasks(env: Mapping[str, str]) -> int | None:
    """How many tasks srun started in this step; None outside a step."""
    if "SLURM_STEP_ID" not in env:
        return None
    found = _first(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
    if found is None or not _is_count(found[1]):
        return None
    return int(found[1])


class SLURMEnvironment(ExternalEnvironment):
    """srun started every rank: one task per rank, in one job step.

    Ranks come from ``SLURM_PROCID`` / ``SLURM_LOCALID`` / ``SLURM_NODEID``; the world size is
    the step's task count (``SLURM_STEP_NUM_TASKS``, else ``SLURM_NTASKS``); the main address
    is ``MASTER_ADDR`` or the first host of the step's node list (``SLURM_STEP_NODELIST``, else
    ``SLURM_NODELIST``), where rank 0 runs; the port is ``MASTER_PORT`` or derived from
    ``SLURM_JOB_ID``, so every task finds it without talking to the others.

    Detected in a step of several tasks only (see the module's table): the batch script of
    ``sbatch --ntasks=N`` sees ``SLURM_NTASKS=N`` and ``SLURM_PROCID=0`` but no step, and
    trusting those would make it wait forever for ranks that never come; a step of one task
    (``srun --ntasks=1``, an ``srun --pty`` shell) leaves the ranks of its node to ddpkit.
    """

    name: ClassVar[str] = "slurm"
    detection_variables: ClassVar[tuple[str, ...]] = (
        "SLURM_STEP_ID",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_NTASKS",
        "SLURM_PROCID",
        "SLURM_NNODES",
        "SLURM_TASKS_PER_NODE",
        "SLURM_NODELIST",
        "SLURM_JOB_ID",
        "SLURM_JOB_NAME",
    )

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        tasks = _step_tasks(env)
        return tasks is not None and tasks > 1 and "SLURM_PROCID" in env

    def main_address(self) -> str:
        if "MASTER_ADDR" in self.env:
            return self.env["MASTER_ADDR"]
        found = _first(self.env, "SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST")
        hosts = expand_nodelist(found[1]) if found else []
        return hosts[0] if hosts else "127.0.0.1"

    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._int("MASTER_PORT")
        # 15000 + the last four digits of the job id: below the ephemeral range, the same in
        # every task of the job. Two steps of one job at once need MASTER_PORT set.
        job_id = self._int("SLURM_JOB_ID")
        return 15000 + job_id % 10000

    def world_size(self) -> int:
        if "SLURM_STEP_NUM_TASKS" in self.env:
            return self._int("SLURM_STEP_NUM_TASKS")
        return self._int("SLURM_NTASKS")

    def set_world_size(self, size: int) -> None:
        """SLURM decides: ignored, and logged (Lightning 1.x's message, at DEBUG)."""
        self._ignored(log, "SLURMEnvironment", "world size")

    def global_rank(self) -> int:
        return self._int("SLURM_PROCID")

    def set_global_rank(self, rank: int) -> None:
        """SLURM decides: ignored, and logged (Lightning 1.x's message, at DEBUG)."""
        self._ignored(log, "SLURMEnvironment", "global rank")

    def local_rank(self) -> int:
        return self._int("SLURM_LOCALID")

    def node_rank(self) -> int:
        return self._int("SLURM_NODEID")

    def num_nodes(self) -> int | None:
        """Nodes in this step, when SLURM says."""
        found = _first(self.env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES")
        return int(found[1]) if found and _is_count(found[1]) else None

    def tasks_per_node(self) -> list[int] | None:
        """Tasks on each node of this step, expanded, when SLURM says."""
        found = _first(self.env, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
        return expand_tasks_per_node(found[1]) if found else None

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        if not self.detect(self.env):
            raise MisconfigurationError(
                f"{call}: the SLURMEnvironment says srun started every rank, but this process "
                f"is not a task of an srun step of several tasks (SLURM_STEP_ID, "
                f"SLURM_STEP_NUM_TASKS > 1 and SLURM_PROCID are not all set). Fix: start the "
                f"script with `srun --ntasks-per-node={devices} python script.py`, or drop the "
                f"SLURMEnvironment and ddpkit starts the ranks itself."
            )
        self._check_integers(
            call, ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_ID", "MASTER_PORT")
        )
        ntasks = self.world_size()
        nodes = self.num_nodes()
        try:
            per_node = self.tasks_per_node()
        except MisconfigurationError as err:
            raise MisconfigurationError(f"{call}: {err}") from None  # the call first, as always
        want = devices * num_nodes
        srun_fix = (
            f"Fix: start the step with `srun --nodes={num_nodes} --ntasks-per-node={devices}`"
        )
        fix = srun_fix
        if nodes and ntasks % nodes == 0:
            fix += f" (or pass devices={ntasks // nodes}, num_nodes={nodes} to match srun)"
        if want != ntasks:
            raise MisconfigurationError(
                f"{call}: devices({devices}) × num_nodes({num_nodes}) = {want}, but srun "
                f"started SLURM_STEP_NUM_TASKS={ntasks} tasks. {fix}."
            )
        if nodes is not None and nodes != num_nodes:
            raise MisconfigurationError(
                f"{call}: num_nodes={num_nodes}, but srun spread its {ntasks} tasks over "
                f"SLURM_NNODES={nodes} nodes. {fix}."
            )
        if per_node is not None and any(n != devices for n in per_node):
            raise MisconfigurationError(
                f"{call}: devices={devices} processes on each node, but srun placed "
                f"{' + '.join(map(str, per_node))} = {sum(per_node)} tasks on its {len(per_node)} "
                f"nodes (SLURM_TASKS_PER_NODE={self._tasks_spec()}). {srun_fix}, so "
                f"every node runs the same number."
            )

    def _tasks_spec(self) -> str:
        found = _first(self.env, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
        return found[1] if found else "?"


def slurm_local_reason(env: Mapping[str, str]) -> str | None:
    """Why a process inside a SLURM job is not one of SLURM's ranks; None outside SLURM jobs or
    for a task :class:`SLURMEnvironment` detects."""
    if "SLURM_JOB_ID" not in env and "SLURM_NTASKS" not in env:
        return None
    tasks = _step_tasks(env)
    if tasks is None:
        ntasks = env.get("SLURM_NTASKS", "?")
        return (
            f"SLURM batch step of job {env.get('SLURM_JOB_ID', '?')} (SLURM_NTASKS={ntasks} but "
            f"no SLURM_STEP_ID; or an salloc shell): not a task srun started, so ddpkit starts "
            f"the ranks of this node itself"
        )
    if tasks <= 1:
        return (
            f"SLURM_STEP_ID={env['SLURM_STEP_ID']} with 1 task (SLURM_STEP_NUM_TASKS="
            f"{env.get('SLURM_STEP_NUM_TASKS', env.get('SLURM_NTASKS', '1'))}): srun started "
            f"this process alone, so ddpkit starts the ranks of this node itself"
        )
    return None


def srun_warning(call: str, env: Mapping[str, str], world_size: int) -> str | None:
    """A warning for a process that runs in a SLURM job of several tasks but was not started by
    srun: ddpkit will start the ranks itself, which is rarely what the job asked SLURM for.
    None when that is not the case.

    srun is at hand wherever a SLURM job runs (it is the job's own launcher), so this reads the
    environment only, and resolution stays a pure function of the probe.
    """
    if "SLURM_STEP_ID" in env or "SLURM_NTASKS" not in env:
        return None
    ntasks = env["SLURM_NTASKS"]
    if not _is_count(ntasks) or int(ntasks) <= 1:
        return None
    starts = f"its {world_size} ranks" if world_size > 1 else "one process"
    return (
        f"{call} runs in SLURM job {env.get('SLURM_JOB_ID', '?')}, which asked for "
        f"SLURM_NTASKS={ntasks} tasks, but srun did not start this process (no SLURM_STEP_ID: "
        f"it is the batch script or an salloc shell), so ddpkit starts {starts} on this node "
        f"itself. Fix: start the script with srun (`srun python script.py ...`), so that SLURM "
        f"starts one task per rank."
    )
