"""Which Trainer calls use Lightning 1.x's device spellings, and the flags they give the connector.

A call is a 1.x device call when it uses a spelling Lightning 2.x refuses and ddpkit's connector
knows: ``gpus=``, ``num_processes=``, a training type in the accelerator slot
(``accelerator="ddp_cpu" | "ddp" | "ddp_spawn" | "ddp_cpu_spawn"``), ddpkit's plugin objects
(``DDPPlugin(...)``, ``DDPSpawnPlugin(...)``, its environments, accelerators and precisions) or a
training-type name in ``plugins=[...]``. Such a call is resolved by the connector, whole. Every
other call is Lightning 2.x's own and goes to Lightning unchanged.

In a 1.x device call, the objects of Lightning's own API are sorted as the connector needs them:
a Lightning cluster environment is the user's environment (1.x users passed them in
``plugins=``), checkpoint IO and layer sync pass through to Lightning, and a Lightning strategy,
accelerator or precision object is refused: the plan could not say what it does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightning_fabric.plugins import CheckpointIO
from lightning_fabric.plugins import ClusterEnvironment as LightningClusterEnvironment
from pytorch_lightning.accelerators import Accelerator as LightningAccelerator
from pytorch_lightning.plugins import LayerSync, Precision
from pytorch_lightning.strategies import Strategy, StrategyRegistry

from ddpkit._flag_names import LEGACY_ACCELERATORS, TRAINING_TYPES
from ddpkit.accelerators import Accelerator
from ddpkit.connector import Flags
from ddpkit.connector._flags import DEVICE_FLAGS
from ddpkit.errors import MisconfigurationError
from ddpkit.lightning._environments import from_lightning, lightning_spelling
from ddpkit.plugins import ClusterEnvironment, PrecisionPlugin, TrainingTypePlugin

#: Training types of Lightning 1.x that Lightning 2.x removed, and what replaces each. Refused in
#: the accelerator slot (1.x's older spelling) and as ``strategy=`` alike.
REMOVED_STRATEGIES = {
    "dp": "Lightning 2.0 removed DataParallel; DDP is faster even on one machine: strategy='ddp'",
    "ddp2": "Lightning 2.0 removed ddp2: strategy='ddp'",
    "horovod": "Lightning 2.0 removed Horovod: strategy='ddp', started with torchrun",
    "ddp_sharded": "Lightning 2.0 removed FairScale sharding: strategy='fsdp'",
    "ddp_sharded_spawn": "Lightning 2.0 removed FairScale sharding: strategy='fsdp'",
    "ddp_sharded_find_unused_parameters_false": "Lightning 2.0 removed FairScale sharding: "
    "strategy='fsdp'",
    "ddp_fully_sharded": "Lightning 2.0 removed FairScale sharding: strategy='fsdp'",
    "fsdp_native": "renamed in Lightning 2.0: strategy='fsdp'",
    "tpu_spawn": "renamed in Lightning 2.0: accelerator='tpu', strategy='xla'",
    "bagua": "Lightning 2.0 removed Bagua: strategy='ddp'",
    "colossalai": "Lightning 2.0 removed ColossalAI: strategy='fsdp'",
    "hpu_parallel": "moved to the lightning-habana package: accelerator='hpu'",
    "hpu_single": "moved to the lightning-habana package: accelerator='hpu'",
    "ipu_strategy": "moved to the lightning-graphcore package",
}


def removed_strategy(flag: str, value: Any) -> None:
    """Refuse a 1.x training type that Lightning 2.x no longer has, naming the replacement."""
    if isinstance(value, str) and value.lower() in REMOVED_STRATEGIES:
        raise MisconfigurationError(
            f"Trainer({flag}={value!r}): {value!r} was a Lightning 1.x training type. Fix: "
            f"{REMOVED_STRATEGIES[value.lower()]}."
        )


def _is_ddpkit_plugin(plugin: Any) -> bool:
    return isinstance(plugin, TrainingTypePlugin | ClusterEnvironment | PrecisionPlugin | str)


def _plugin_list(plugins: Any) -> list[Any]:
    """``plugins=`` as Lightning takes it (None, one plugin, a list or a tuple), as a list."""
    if plugins is None:
        return []
    return list(plugins) if isinstance(plugins, list | tuple) else [plugins]


def is_legacy_device_call(kwargs: Mapping[str, Any]) -> bool:
    """True when the call uses a device spelling of Lightning 1.x that ddpkit's connector knows."""
    if "gpus" in kwargs or "num_processes" in kwargs:
        return True
    accelerator = kwargs.get("accelerator")
    if isinstance(accelerator, Accelerator):
        return True
    if isinstance(accelerator, str) and accelerator.lower() in LEGACY_ACCELERATORS:
        return True
    if isinstance(kwargs.get("strategy"), TrainingTypePlugin):
        return True
    return any(_is_ddpkit_plugin(p) for p in _plugin_list(kwargs.get("plugins")))


def device_call(kwargs: Mapping[str, Any]) -> tuple[Flags, list[Any]]:
    """A 1.x device call, sorted: the connector's flags and the Lightning plugins it passes on."""
    given = {k: v for k, v in kwargs.items() if k in DEVICE_FLAGS}  # the user's order
    if given.get("precision") is None:
        given.pop("precision", None)  # Lightning's default; the connector's is 32-true
    call = quoted(given)  # as the user wrote it, before any sorting
    plugins, passthrough = _sort_plugins(call, given.pop("plugins", None))
    if plugins:
        given["plugins"] = plugins
    _refuse_lightning_objects(call, given)
    return Flags.of(**given), passthrough


def _sort_plugins(call: str, plugins: Any) -> tuple[list[Any], list[Any]]:
    mine: list[Any] = []
    passthrough: list[Any] = []
    for plugin in _plugin_list(plugins):
        if isinstance(plugin, LightningClusterEnvironment):
            _check_detected(call, plugin)
            mine.append(from_lightning(plugin))
        elif isinstance(plugin, CheckpointIO | LayerSync):
            passthrough.append(plugin)
        elif isinstance(plugin, Precision):
            raise MisconfigurationError(
                f"{call}: plugins=[{type(plugin).__name__}(...)] is a Lightning precision "
                f"plugin, but with 1.x device flags ddpkit's connector resolves the precision. "
                f"Fix: pass precision={getattr(plugin, 'precision', '16-mixed')!r} instead."
            )
        else:
            mine.append(plugin)
    return mine, passthrough


def _check_detected(call: str, environment: LightningClusterEnvironment) -> None:
    """A Lightning environment reads its job from the variables its launcher set; outside such a
    job it cannot answer (Lightning's SLURMEnvironment: ``KeyError: 'SLURM_NTASKS'``)."""
    if not type(environment).detect():
        name = type(environment).__name__
        raise MisconfigurationError(
            f"{call}: plugins=[{name}()] reads the ranks of a job its launcher started, but "
            f"this process was not started by one ({name}.detect() is False). Fix: start the "
            f"script with that launcher (srun for SLURMEnvironment, torchrun for "
            f"TorchElasticEnvironment), or drop plugins=[{name}()] and let ddpkit detect the job."
        )


def _refuse_lightning_objects(call: str, given: dict[str, Any]) -> None:
    """Lightning's own strategy or accelerator objects (and strategy names only Lightning has)
    cannot be resolved together with 1.x device flags: say how to spell the call for Lightning."""
    modern = _modern_device_words(given)
    strategy = given.get("strategy")
    lightning_only = isinstance(strategy, Strategy) or (
        isinstance(strategy, str)
        and strategy != "auto"
        and strategy not in TRAINING_TYPES
        and strategy in StrategyRegistry.available_strategies()
    )
    accelerator = given.get("accelerator")
    if lightning_only or isinstance(accelerator, LightningAccelerator):
        name, value = ("strategy", strategy) if lightning_only else ("accelerator", accelerator)
        what = f"{name}={_show(value)}"
        raise MisconfigurationError(
            f"{call}: {what} is Lightning 2.x's own, and Lightning 2.x resolves its own objects "
            f"only with its own device flags. Fix: spell the devices the Lightning 2.x way, "
            f"{modern}, and keep {what}."
        )


def _show(value: Any) -> str:
    """As the user wrote it, near enough: Lightning's objects have no repr of their own, so they
    show as ``DDPStrategy(...)``."""
    if isinstance(value, str | int | float | bool | type(None)):
        return repr(value)
    if isinstance(value, list | tuple):
        return f"[{', '.join(_show(v) for v in value)}]"
    shown = lightning_spelling(value)
    return f"{type(value).__name__}(...)" if shown == f"{type(value).__name__}()" else shown


def quoted(given: Mapping[str, Any]) -> str:
    """The device flags of a call, for messages: ``Trainer(gpus=2, strategy=DDPStrategy(...))``."""
    return f"Trainer({', '.join(f'{name}={_show(value)}' for name, value in given.items())})"


def _modern_device_words(given: dict[str, Any]) -> str:
    """``gpus=2`` → ``accelerator='gpu', devices=2``: for the fix of a refusal only."""
    accelerator = given.get("accelerator")
    if isinstance(accelerator, str) and accelerator.lower() in LEGACY_ACCELERATORS:
        accelerator = LEGACY_ACCELERATORS[accelerator.lower()][0]
    devices = given.get("devices")
    if given.get("gpus") not in (None, 0):
        accelerator, devices = "gpu", given["gpus"]
    elif given.get("num_processes") is not None:
        accelerator, devices = "cpu", given["num_processes"]
    words = [f"accelerator={accelerator!r}"] if isinstance(accelerator, str) else []
    if devices is not None:
        words.append(f"devices={devices!r}")
    return ", ".join(words) or "accelerator='cpu', devices=1"
