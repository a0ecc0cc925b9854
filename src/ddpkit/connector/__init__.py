"""The accelerator connector: Trainer flags → a plan → live objects.

``resolve(Flags, Probe) -> Plan`` decides (pure); ``build(Plan, Probe) -> Built`` constructs,
and checks the objects against the plan. :class:`AcceleratorConnector` is the façade the Trainer
embeds.
"""

from __future__ import annotations

from ddpkit.connector._build import Built, build
from ddpkit.connector._flags import Flags
from ddpkit.connector._plan import Choice, Plan, PlanWarning
from ddpkit.connector._probe import Probe
from ddpkit.connector._rules import resolve
from ddpkit.errors import DDPKitDeprecationWarning, DDPKitWarning
from ddpkit.utilities._rank_zero import rank_zero_warn

__all__ = [
    "AcceleratorConnector",
    "Built",
    "Choice",
    "Flags",
    "Plan",
    "PlanWarning",
    "Probe",
    "build",
    "resolve",
]


class AcceleratorConnector:
    """Resolve the flags once, warn once (rank zero), build the objects."""

    def __init__(self, flags: Flags, probe: Probe | None = None) -> None:
        self.flags = flags
        self.probe = probe if probe is not None else Probe.capture()
        self.plan: Plan = resolve(flags, self.probe)
        self.built: Built = build(self.plan, self.probe)
        for warning in self.plan.warnings:
            category = DDPKitDeprecationWarning if warning.deprecation else DDPKitWarning
            rank_zero_warn(warning.message, category, env=self.probe.env)

    def explain(self) -> str:
        return self.plan.explain()
