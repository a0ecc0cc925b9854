"""The plan: every decision the connector made, each with the reason that made it."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ddpkit.accelerators._base import Accelerator
from ddpkit.connector._types import AcceleratorName, LauncherName, PrecisionName, TrainingTypeName
from ddpkit.plugins.environments._base import ClusterEnvironment
from ddpkit.plugins.precision._base import PrecisionPlugin
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.utilities._reprs import safe_repr

T = TypeVar("T")


@dataclass(frozen=True)
class Choice(Generic[T]):
    """A decided value and why: the flag, rule or environment variable that decided it."""

    value: T
    reason: str


@dataclass(frozen=True)
class PlanWarning:
    """A warning the connector emits once, on rank zero, when it builds the plan."""

    message: str
    deprecation: bool = True


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What will run. Built by :func:`ddpkit.connector.resolve`; turned into objects by
    :func:`ddpkit.connector._build`. Holds names and numbers, plus the user's own plugin objects
    (which are used as given)."""

    call: str
    """The user's call, as written (for messages)."""
    accelerator: Choice[AcceleratorName]
    devices: Choice[tuple[int, ...]]
    """Device indices of this node: CUDA ordinals for GPUs, 0..n-1 for CPU processes."""
    num_nodes: Choice[int]
    training_type: Choice[TrainingTypeName]
    training_type_options: dict[str, Any] = field(default_factory=dict)
    """The constructor options of a training type ddpkit builds (``find_unused_parameters``...);
    empty for the user's own instance, which is used with its own."""
    backend: Choice[str | None]
    """The process-group backend ("gloo", "nccl", ...); None for one process."""
    launcher: Choice[LauncherName]
    environment: Choice[str]
    """"local", "torchelastic", "slurm", or the class name of the user's environment."""
    precision: Choice[PrecisionName]
    sync_batchnorm: Choice[bool]
    modern_call: str
    """The same request in today's spelling."""
    warnings: tuple[PlanWarning, ...] = ()
    accelerator_instance: Accelerator | None = None
    training_type_instance: TrainingTypePlugin | None = None
    """The user's training-type instance; when another Trainer already uses it, this Trainer
    gets a copy of it (``copies_instance``), so that neither sees the other's decisions."""
    copies_instance: bool = False
    environment_instance: ClusterEnvironment | None = None
    precision_instance: PrecisionPlugin | None = None

    @property
    def num_processes(self) -> int:
        """Processes per node."""
        return len(self.devices.value)

    @property
    def world_size(self) -> int:
        return self.num_processes * self.num_nodes.value

    def rows(self) -> list[tuple[str, str, str]]:
        """(field, value, reason) rows, in the order ``ddpkit explain`` prints them."""
        tt = self.training_type
        instance = self.training_type_instance
        tt_value = safe_repr(instance) if instance is not None else tt.value
        if self.training_type_options:
            opts = ", ".join(f"{k}={v!r}" for k, v in self.training_type_options.items())
            tt_value = f"{tt.value}({opts})"
        acc = self.accelerator.value
        devs = self.devices.value
        dev_value = ", ".join(f"cuda:{i}" for i in devs) if acc == "gpu" else f"{len(devs)} × cpu"
        return [
            ("accelerator", acc, self.accelerator.reason),
            ("devices", dev_value, self.devices.reason),
            ("num_nodes", str(self.num_nodes.value), self.num_nodes.reason),
            (
                "world_size",
                str(self.world_size),
                f"devices({len(devs)}) × num_nodes({self.num_nodes.value})",
            ),
            ("training_type", tt_value, tt.reason),
            ("backend", self.backend.value or "none", self.backend.reason),
            ("launcher", self.launcher.value, self.launcher.reason),
            ("environment", self.environment.value, self.environment.reason),
            ("precision", self.precision.value, self.precision.reason),
            ("sync_batchnorm", str(self.sync_batchnorm.value), self.sync_batchnorm.reason),
        ]

    def explain(self, width: int = 100) -> str:
        """One aligned line per field with its reason, then the modern spelling and the
        warnings; a line longer than ``width`` goes on under the column it started in."""
        rows = self.rows()
        w0 = max(len(r[0]) for r in rows)
        w1 = max(len(r[1]) for r in rows)
        lines = [f"plan for {self.call}"]
        lines += [f"  {f:<{w0}}  {v:<{w1}}  {why}" for f, v, why in rows]
        lines.append(f"  {'modern call':<{w0}}  {self.modern_call}")
        for warning in self.warnings:
            kind = "deprecated" if warning.deprecation else "warning"
            lines.append(f"  {kind + ':':<{w0}}  {warning.message}")
        return "\n".join(_wrap(line, width) for line in lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: each field's value and reason, and the modern call."""
        out: dict[str, Any] = {"call": self.call}
        for name, value, why in self.rows():
            out[name] = {"value": value, "reason": why}
        out["devices"]["indices"] = list(self.devices.value)
        out["modern_call"] = self.modern_call
        out["warnings"] = [w.message for w in self.warnings]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)


def _wrap(line: str, width: int) -> str:
    """``line`` wrapped under the column its last field starts in (the text after its last run
    of two or more spaces), else four spaces in; words are never broken."""
    if len(line) <= width:
        return line
    lead = len(line) - len(line.lstrip())
    column = re.match(r"^(.*\S {2,})", line)
    start = len(column.group(1)) if column and len(column.group(1)) < width - 30 else lead
    return textwrap.fill(
        line[start:],
        width,
        initial_indent=line[:start],
        subsequent_indent=" " * (start if start > lead else lead + 4),
        break_long_words=False,
        break_on_hyphens=False,
    )
