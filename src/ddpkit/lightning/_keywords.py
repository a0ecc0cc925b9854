"""Lightning 1.x's non-device Trainer keywords, in Lightning 2.x's spelling: what
``ddpkit.lightning.Trainer`` does with each row of the shared table
(:mod:`ddpkit._compat_1x.keywords`: the facts — removed in, the values 1.x took, its defaults, the
Lightning 2.x spelling — which ``ddpkit.Trainer`` reads too).

Each keyword Lightning 2.x removed (and each 1.x *value* of a keyword it kept, such as
``accumulate_grad_batches={0: 1, 4: 2}``) is either mapped onto its 2.x spelling, with one
``DDPKitDeprecationWarning`` naming that spelling, or refused with a ``MisconfigurationError``
naming the replacement when Lightning 2.x has no way to do the same from the Trainer. A value that
asks for what Lightning 2.x does anyway (``weights_summary="top"``) is mapped to nothing, and the
warning says to drop it. A handler applies a value that asks for something onto Lightning 2.x's
Trainer (a keyword, a callback, something a stage does); a row with ``gone`` set has no handler:
Lightning 2.x cannot do what its values ask, and :func:`apply_keyword` refuses them. The table is
:data:`KEYWORDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytorch_lightning.callbacks import (
    DeviceStatsMonitor,
    GradientAccumulationScheduler,
    ModelCheckpoint,
    ModelSummary,
    ProgressBar,
)

from ddpkit._compat_1x.keywords import ROWS, Row
from ddpkit.errors import MisconfigurationError
from ddpkit.lightning._callbacks import GradNormLogger


def quote(name: str, value: Any) -> str:
    """The keyword as the user wrote it: ``Trainer(weights_summary='full')``."""
    return f"Trainer({name}={value!r})"


def callback_list(given: Any) -> list[Any]:
    """``callbacks=`` as Lightning takes it (None, one callback or a list), as a new list."""
    return [] if given is None else list(given) if isinstance(given, list) else [given]


@dataclass
class Rewrite:
    """The Lightning 2.x Trainer a call means, built up keyword by keyword."""

    kwargs: dict[str, Any]
    """Lightning 2.x keywords: the user's own, plus what 1.x keywords became."""
    given: Mapping[str, Any]
    """The call as the user wrote it (for conflicts between a 1.x keyword and its 2.x name)."""
    callbacks: list[Any] = field(default_factory=list)
    """Callbacks that 1.x keywords became, added after the user's own."""
    messages: list[str] = field(default_factory=list)
    """One deprecation message per 1.x keyword."""
    resume_from_checkpoint: Any = None
    """``fit(ckpt_path=...)`` when ``fit`` is called without one."""
    prepare_data_per_node: bool | None = None
    """Set on the module and data module of every stage."""
    flush_logs_every_n_steps: int | None = None
    """Set on every CSVLogger of the Trainer."""
    tune: dict[str, Any] = field(default_factory=dict)
    """What ``trainer.tune()`` runs: ``{"lr_find": attr_name, "scale_batch_size": mode}``."""
    progress_bar: dict[str, Any] = field(default_factory=dict)
    """``TQDMProgressBar`` arguments (``refresh_rate``, ``process_position``)."""
    automatic_optimization: bool | None = None
    """Set on the module of every stage (1.1–1.2's ``Trainer(automatic_optimization=False)``)."""
    current: str = ""
    """The 1.x keyword being applied, as written (``weights_summary=None``)."""

    def set(self, name: str, value: Any) -> None:
        """Set a 2.x keyword that the current 1.x one became, unless the user set it otherwise."""
        source = self.current
        if self.given.get(name) is not None and self.given[name] != value:
            raise MisconfigurationError(
                f"Trainer({source}, {name}={self.given[name]!r}): {source} means {name}="
                f"{value!r}, which contradicts {name}={self.given[name]!r}. Fix: pass only "
                f"{name}={self.given[name]!r}."
            )
        self.kwargs[name] = value

    def users(self, kind: type) -> Any:
        """The user's own callback of that kind in ``callbacks=`` (None: there is none)."""
        return next(
            (c for c in callback_list(self.given.get("callbacks")) if isinstance(c, kind)), None
        )


#: A 1.x keyword's handler: applies a value that asks for something to the rewrite. It returns
#: None (the row's Lightning 2.x spelling names what it became), its own spelling, or
#: :data:`NOTHING` (this value asks for nothing after all); or it refuses the value itself.
Handler = Callable[[Any, Rewrite], "str | None"]
#: A handler's answer: the value asks for what Lightning 2.x does anyway.
NOTHING = "\0nothing"


def apply_keyword(row: Row, value: Any, rewrite: Rewrite) -> None:
    """What ``ddpkit.lightning.Trainer`` does with a value of one row of the shared table."""
    nothing = row.asks_for_nothing(value)
    if nothing is True:
        return  # the last 1.x default: what Trainer(...) without it does
    if row.kept and nothing is None and not row.check(value):
        if row.takes is not None and not row.takes[1](value):
            raise MisconfigurationError(
                f"{quote(row.name, value)}: Lightning 2.x takes {row.takes[0]}, and "
                f"Lightning 1.x took {row.accepts}. Fix: pass one of those, or drop it."
            )
        rewrite.kwargs[row.name] = value  # a value Lightning 2.x takes
        return
    if nothing is None and not row.check(value):
        raise MisconfigurationError(
            f"{quote(row.name, value)}: Lightning 1.x took {row.accepts}. Fix: pass one of "
            f"those, or drop it."
        )
    if nothing is None and row.gone:
        raise MisconfigurationError(
            f"{quote(row.name, value)}: removed in Lightning {row.removed}, and {row.gone}. "
            f"Fix: {row.spelling(value)}."
        )
    rewrite.current = f"{row.name}={value!r}"
    # A value that asks for nothing has nothing to pass on: Trainer(...) without it does the same.
    handler = _HANDLERS.get(row.name) if nothing is None else None
    answer = handler(value, rewrite) if handler is not None else NOTHING
    spelling = row.spelling(value) if answer is None else answer
    what = "this value was removed" if row.kept else "removed"
    head = f"{quote(row.name, value)}: {what} in Lightning {row.removed}"
    if spelling == NOTHING:
        rewrite.messages.append(f"{head}; it asks for what Lightning 2.x does. Fix: drop it.")
    else:
        rewrite.messages.append(
            f"{head}; ddpkit runs it as its Lightning 2.x spelling, {spelling}."
        )


def _kept(field: str) -> Handler:
    """The value kept in the :class:`Rewrite` field of that name, for the stages to apply."""

    def handler(value: Any, rw: Rewrite) -> None:
        setattr(rw, field, value)

    return handler


def _as(name: str, fixed: Any = None) -> Handler:
    """The value (or ``fixed``) as the Lightning 2.x keyword ``name`` (:meth:`Rewrite.set`)."""

    def handler(value: Any, rw: Rewrite) -> None:
        rw.set(name, value if fixed is None else fixed)

    return handler


def _progress_bar_refresh_rate(value: Any, rw: Rewrite) -> str | None:
    if value == 0 and rw.users(ProgressBar) is not None:
        return NOTHING  # 1.x: a progress bar of the user's wins over any rate, 0 included
    # A rate asks for a bar: enable_progress_bar=False beside it is a contradiction (refused).
    rw.set("enable_progress_bar", value != 0)
    if value != 0:
        rw.progress_bar["refresh_rate"] = value
    return None


def _process_position(value: Any, rw: Rewrite) -> None:
    rw.progress_bar["process_position"] = value


def _weights_summary(value: Any, rw: Rewrite) -> str | None:
    if value is None:
        rw.set("enable_model_summary", False)
    elif rw.users(ModelSummary) is not None:
        return NOTHING  # 1.5–1.9: a ModelSummary of the user's wins ("Skipping setting a default")
    else:
        rw.callbacks.append(ModelSummary(max_depth=-1))
    return None


def _checkpoint_callback(value: Any, rw: Rewrite) -> None:
    if value is False and rw.users(ModelCheckpoint) is not None:
        # 1.x refused it in its own words ("configured with checkpoint_callback=False but found
        # ModelCheckpoint"); Lightning 2.x's message would name enable_checkpointing instead.
        raise MisconfigurationError(
            "Trainer(checkpoint_callback=False, callbacks=[..., ModelCheckpoint(...)]): "
            "checkpointing off, and a ModelCheckpoint to save with, as Lightning 1.x refused "
            "too. Fix: drop checkpoint_callback=False (your ModelCheckpoint saves), or the "
            "ModelCheckpoint."
        )
    if isinstance(value, bool):
        rw.set("enable_checkpointing", value)
    else:  # Lightning 1.0–1.2 took a ModelCheckpoint here
        rw.callbacks.append(value)


def _log_gpu_memory(value: Any, rw: Rewrite) -> str | None:
    if rw.users(DeviceStatsMonitor) is not None:
        return NOTHING  # the user's monitor logs the device's memory already (not twice)
    rw.callbacks.append(DeviceStatsMonitor())
    return None


def _track_grad_norm(value: Any, rw: Rewrite) -> None:
    rw.callbacks.append(GradNormLogger(float(value)))


def _auto_select_gpus(value: Any, rw: Rewrite) -> str:
    flag = "gpus" if "gpus" in rw.kwargs else "devices"
    count = rw.kwargs.get(flag)
    on_gpu = flag == "gpus" or rw.kwargs.get("accelerator") in ("gpu", "cuda")
    if not on_gpu or isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return NOTHING  # 1.x picked GPUs only for an integer count of them
    from lightning_fabric.accelerators.cuda import find_usable_cuda_devices, num_cuda_devices

    if num_cuda_devices() == 0:
        return NOTHING  # nothing to pick from: the connector says so, with the fix
    rw.kwargs[flag] = find_usable_cuda_devices(count)
    return f"devices=find_usable_cuda_devices({count})"


def _auto_lr_find(value: Any, rw: Rewrite) -> None:
    rw.tune["lr_find"] = "" if value is True else str(value)


def _auto_scale_batch_size(value: Any, rw: Rewrite) -> None:
    rw.tune["scale_batch_size"] = "power" if value is True else value


def _accumulate_grad_batches(value: Any, rw: Rewrite) -> None:
    assert isinstance(value, Mapping)  # the row's check: a schedule (None asks for nothing)
    if rw.users(GradientAccumulationScheduler) is not None:
        # Two schedules, each setting the factor at every epoch's start: 1.8 refused the two
        # together, as Lightning 2.x refuses an int beside the callback.
        raise MisconfigurationError(
            f"Trainer(accumulate_grad_batches={dict(value)!r}, callbacks=[..., "
            f"GradientAccumulationScheduler(...)]): both set the accumulation schedule. Fix: keep "
            f"one: callbacks=[GradientAccumulationScheduler(scheduling={dict(value)!r})] "
            f"without accumulate_grad_batches, or your callback alone."
        )
    rw.kwargs["accumulate_grad_batches"] = 1
    rw.callbacks.append(GradientAccumulationScheduler(scheduling=dict(value)))


def _profiler(value: Any, rw: Rewrite) -> None:
    rw.kwargs["profiler"] = "simple"  # True (False asks for nothing)


#: Each row's handler. A row without one: no value of it asks for something Lightning 2.x can do
#: (a row with ``gone``), or none asks for what Lightning 2.x does not do anyway (``amp_level``).
_HANDLERS: dict[str, Handler] = {
    "resume_from_checkpoint": _kept("resume_from_checkpoint"),
    "progress_bar_refresh_rate": _progress_bar_refresh_rate,
    "process_position": _process_position,
    "weights_summary": _weights_summary,
    "checkpoint_callback": _checkpoint_callback,
    "terminate_on_nan": _as("detect_anomaly", True),
    "flush_logs_every_n_steps": _kept("flush_logs_every_n_steps"),
    "log_gpu_memory": _log_gpu_memory,
    "prepare_data_per_node": _kept("prepare_data_per_node"),
    "track_grad_norm": _track_grad_norm,
    "auto_select_gpus": _auto_select_gpus,
    # amp_level has none: 1.x read it only with amp_backend='apex', which is refused
    "replace_sampler_ddp": _as("use_distributed_sampler"),
    "reload_dataloaders_every_epoch": _as("reload_dataloaders_every_n_epochs", 1),
    "distributed_backend": _as("accelerator"),
    "automatic_optimization": _kept("automatic_optimization"),  # False: True asks for nothing
    "auto_lr_find": _auto_lr_find,
    "auto_scale_batch_size": _auto_scale_batch_size,
    "accumulate_grad_batches": _accumulate_grad_batches,
    "profiler": _profiler,
}

#: Every 1.x keyword of the shared table, by name, in the table's order (the order applied).
KEYWORDS: dict[str, Row] = ROWS
