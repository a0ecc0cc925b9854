"""A resolved plan, as Lightning 2.x's own device arguments.

The connector decides (accelerator, devices, nodes, training type, launcher, environment,
precision); :func:`lightning_devices` reads each decision from the plan and from the objects the
connector built and turns it into Lightning's objects, plus the Lightning 2.x call that means the
same, for the deprecation message. It decides nothing.

=================================  =====================================================
ddpkit (plan / built objects)      Lightning 2.x
=================================  =====================================================
accelerator cpu / gpu              ``accelerator="cpu"`` / ``"gpu"``
devices                            ``devices=N`` (CPU processes, GPUs 0..N-1) or the GPU ids
num_nodes                          ``num_nodes``
single_device                      ``SingleDeviceStrategy(device)``
ddp (launcher subprocess or        ``DDPStrategy(start_method="popen", ...)``
external)
ddp_spawn (launcher spawn)         ``DDPStrategy(start_method=<the plugin's>, ...)``
the plugin's DDP options           ``find_unused_parameters``, ``static_graph``,
                                   ``gradient_as_bucket_view``, ``process_group_backend``,
                                   ``timeout``, every other DDP keyword, as given
environment                        ``LightningEnvironment`` / ``TorchElasticEnvironment`` /
                                   ``SLURMEnvironment`` / the user's own
precision, sync_batchnorm          ``precision``, ``sync_batchnorm``
=================================  =====================================================
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from pytorch_lightning.strategies import DDPStrategy, SingleDeviceStrategy, Strategy

from ddpkit.accelerators import CPUAccelerator, GPUAccelerator
from ddpkit.connector import Built, Plan
from ddpkit.errors import MisconfigurationError
from ddpkit.lightning._environments import lightning_spelling, to_lightning
from ddpkit.plugins.precision import DoublePrecisionPlugin, MixedPrecisionPlugin, PrecisionPlugin
from ddpkit.plugins.training_type import DDPPlugin, DDPSpawnPlugin, SingleDevicePlugin

#: The ddpkit classes whose whole behaviour Lightning's objects reproduce. A subclass has methods
#: of its own that Lightning's loop would never call: it is refused, never half-run.
_RUNS_ON_LIGHTNING = (
    CPUAccelerator,
    GPUAccelerator,
    SingleDevicePlugin,
    DDPPlugin,
    DDPSpawnPlugin,
    PrecisionPlugin,
    MixedPrecisionPlugin,
    DoublePrecisionPlugin,
)
#: Lightning's registry names for DDP by start method (each also has "_find_unused_parameters_*").
_REGISTRY_NAMES = {"popen": "ddp", "spawn": "ddp_spawn", "fork": "ddp_fork"}


@dataclass(frozen=True)
class LightningDevices:
    """The device arguments of a Lightning 2.x Trainer that run one plan."""

    accelerator: str
    devices: int | list[int]
    num_nodes: int
    strategy: Strategy
    precision: str
    sync_batchnorm: bool
    plugins: list[Any] = field(default_factory=list)
    call: str = ""
    """The same, as the Lightning 2.x call a user would write."""

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``pytorch_lightning.Trainer``."""
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "call"}
        return {**kwargs, "plugins": list(self.plugins)}


def ddp_options(plugin: DDPPlugin) -> dict[str, Any]:
    """The plugin's options as ``DDPStrategy`` keywords; options left at DDP's defaults are left
    out, so ``DDPPlugin()`` maps to the same object as Lightning's ``strategy="ddp"``."""
    options: dict[str, Any] = {}
    for name in ("find_unused_parameters", "static_graph", "gradient_as_bucket_view"):
        if getattr(plugin, name):
            options[name] = True
    options.update(plugin.ddp_kwargs)
    if plugin.timeout is not None:
        options["timeout"] = plugin.timeout
    return options


def strategy_spelling(start_method: str, options: dict[str, Any]) -> str:
    """How Lightning 2.x users write this DDP strategy: a registry name where one means exactly
    this, else ``DDPStrategy(...)``."""
    name = _REGISTRY_NAMES.get(start_method)
    if name is not None and set(options) <= {"find_unused_parameters"}:
        return repr(f"{name}_find_unused_parameters_true" if options else name)
    args = [] if start_method == "popen" else [f"start_method={start_method!r}"]
    args += [f"{key}={_value(value)}" for key, value in options.items()]
    return f"DDPStrategy({', '.join(args)})"


def _value(value: Any) -> str:
    if isinstance(value, datetime.timedelta):
        return f"timedelta(seconds={value.total_seconds():g})"
    return repr(value)


def _check_runs_on_lightning(plan: Plan, built: Built) -> None:
    for obj in (built.accelerator, built.training_type, built.precision_plugin):
        if type(obj) not in _RUNS_ON_LIGHTNING:
            kind = type(obj).__mro__[1].__name__
            raise MisconfigurationError(
                f"{plan.call}: {obj!r} is a subclass of ddpkit's {kind}; its own methods would "
                f"never run on Lightning's loop. Fix: pass the Lightning 2.x object that does "
                f"the same (a Strategy, Accelerator or Precision subclass of your own), with "
                f"accelerator=, devices= and strategy= in Lightning 2.x's spelling."
            )


def _strategy(plan: Plan, built: Built, supervise: bool) -> tuple[Strategy, str | None]:
    plugin = built.training_type
    if plan.training_type.value == "single_device":
        return SingleDeviceStrategy(device=plugin.root_device), None
    if not isinstance(plugin, DDPPlugin):  # the plan says ddp / ddp_spawn: the connector built one
        raise TypeError(f"the plan says {plan.training_type.value}, but the plugin is {plugin!r}")
    start_method = "popen"
    if plan.launcher.value in ("spawn", "fork") and isinstance(plugin, DDPSpawnPlugin):
        start_method = plugin.start_method
    options = ddp_options(plugin)
    # The plan's backend (the plugin's, 1.x's PL_TORCH_DISTRIBUTED_BACKEND, the accelerator's),
    # named only where Lightning would not choose the same.
    default = "nccl" if plan.accelerator.value == "gpu" else "gloo"
    timeout = options.pop("timeout", None)
    if plugin.process_group_backend is not None or plan.backend.value not in (None, default):
        options["process_group_backend"] = plan.backend.value
    if timeout is not None:
        options["timeout"] = timeout
    spelling = strategy_spelling(start_method, options)
    if supervise:
        from ddpkit.lightning._supervised import SupervisedDDPStrategy

        return SupervisedDDPStrategy.from_built(built, start_method, options), spelling
    strategy = DDPStrategy(start_method=start_method, **options)  # type: ignore[arg-type]
    return strategy, spelling


def _devices(plan: Plan, built: Built) -> int | list[int]:
    devices = built.training_type.parallel_devices
    if plan.accelerator.value != "gpu":
        return len(devices)
    ids = [torch.device(d).index or 0 for d in devices]
    return len(ids) if ids == list(range(len(ids))) else ids


def lightning_devices(
    plan: Plan, built: Built, extra_plugins: list[Any], *, supervise: bool = False
) -> LightningDevices:
    """Lightning's objects for the plan the connector resolved; ``extra_plugins`` are the user's
    Lightning plugins that are no part of the plan (checkpoint IO, layer sync), passed on.
    ``supervise``: DDP runs as :class:`~ddpkit.lightning.SupervisedDDPStrategy` on the launcher
    the connector built; :attr:`LightningDevices.call` still names plain Lightning's spelling of
    the same training."""
    _check_runs_on_lightning(plan, built)
    strategy, strategy_text = _strategy(plan, built, supervise)
    # One process has no cluster: Lightning's single-device strategy takes no environment.
    single = plan.training_type.value == "single_device"
    plugins = [*([] if single else [to_lightning(built.cluster_environment)]), *extra_plugins]
    accelerator = "gpu" if plan.accelerator.value == "gpu" else "cpu"
    devices = _devices(plan, built)
    precision = built.precision_plugin.precision
    sync_batchnorm = built.training_type.sync_batchnorm
    num_nodes = built.training_type.num_nodes
    parts = [f"accelerator={accelerator!r}", f"devices={devices!r}"]
    if num_nodes != 1:
        parts.append(f"num_nodes={num_nodes}")
    if strategy_text is not None:
        parts.append(f"strategy={strategy_text}")
    if precision != "32-true":
        parts.append(f"precision={precision!r}")
    if sync_batchnorm:
        parts.append("sync_batchnorm=True")
    # Lightning detects a local run the same way; any other environment is named, because
    # Lightning's own detection differs from the connector's (SLURM: ddpkit asks for an srun step).
    shown = extra_plugins if plan.environment.value == "local" else plugins
    if shown:
        parts.append(f"plugins=[{', '.join(lightning_spelling(p) for p in shown)}]")
    return LightningDevices(
        accelerator=accelerator,
        devices=devices,
        num_nodes=num_nodes,
        strategy=strategy,
        precision=precision,
        sync_batchnorm=sync_batchnorm,
        plugins=plugins,
        call=f"Trainer({', '.join(parts)})",
    )
