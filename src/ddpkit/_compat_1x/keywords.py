"""The one table of Lightning 1.x Trainer keywords that Lightning 2.x no longer takes.

Both Trainers read it: ``ddpkit.Trainer`` (:mod:`ddpkit.trainer._legacy`) and
``ddpkit.lightning.Trainer`` (:mod:`ddpkit.lightning._keywords`; its signature gets the 1.x
keywords from :attr:`Row.annotation` and :attr:`Row.default`). A row holds the facts: which
Lightning release removed the keyword, the values 1.x took, its last 1.x default, the values that
ask for nothing Lightning 2.x does not do anyway, and Lightning 2.x's spelling of the same. What
each Trainer *does* with a value is that Trainer's own table, keyed by these names.

Sources: the ``Trainer.__init__`` signatures of Lightning 1.0.0 to 1.9.0 (kept as data in
``tests/lightning/data/trainer_1x_signatures.json``, whose test holds this table to them) and
Lightning's CHANGELOG, whose deprecation notices name the replacements used here. Nothing here
imports Lightning: ``import ddpkit`` never does.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_NOT_1X = object()


def is_value(value: Any, candidates: tuple[Any, ...]) -> bool:
    """``value`` equals one of ``candidates`` with the same type (``1`` is not ``True``)."""
    return any(type(value) is type(c) and value == c for c in candidates)


def as_call(spelling: str) -> str:
    """``enable_progress_bar=False`` → ``Trainer(enable_progress_bar=False)``; a spelling that is
    not a Trainer keyword (``trainer.fit(...)``, a hook) is returned as it is."""
    return f"Trainer({spelling})" if re.match(r"^[a-z_]+=", spelling) else spelling


@dataclass(frozen=True)
class Row:
    """One keyword of Lightning 1.x's Trainer that 2.x removed, or whose 1.x values it refuses."""

    name: str
    removed: str
    """The Lightning release that removed it (``"1.0"``: a keyword of 0.x, gone before 1.0)."""
    accepts: str
    """The values Lightning 1.x took, in words (for the message that refuses any other)."""
    check: Callable[[Any], bool]
    """True for a value Lightning 1.x took."""
    spelling: Callable[[Any], str]
    """Lightning 2.x's spelling of a value that asks for something (or, when :attr:`gone`, the
    fix), e.g. ``enable_progress_bar=False``."""
    example: Any
    """A value that asks for something, for the fix of a message about a bad value."""
    default: Any = _NOT_1X
    """Its last 1.x default: a value that asks for nothing, accepted without a word."""
    noop: tuple[Any, ...] = ()
    """Other values that ask for what Lightning 2.x does anyway (earlier 1.x defaults among them):
    accepted, with a warning that says to drop them."""
    annotation: Any = None
    """Its 1.x type, for signatures (None: a 0.x keyword, never in a 1.x signature)."""
    gone: str = ""
    """Why Lightning 2.x cannot do what any other value asks (every such value is refused)."""
    kept: bool = False
    """Lightning 2.x kept the keyword and refuses only the 1.x values :attr:`check` accepts."""
    takes: tuple[str, Callable[[Any], bool]] | None = None
    """For a kept keyword: the values Lightning 2.x takes, in words and as a check. Any other
    value (neither 1.x's nor 2.x's) is refused before Lightning sees it: Lightning's own check
    is a ``TypeError`` from a comparison, or none until ``fit``."""

    @property
    def is_1x(self) -> bool:
        return self.default is not _NOT_1X

    def asks_for_nothing(self, value: Any) -> bool | None:
        """True: the last 1.x default (nothing to say); False: another value asking for nothing
        (say to drop it); None: the value asks for something."""
        if self.is_1x and is_value(value, (self.default,)):
            return True
        return False if is_value(value, self.noop) else None


def _int(least: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= least


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


#: The profiler names Lightning 2.x's Trainer takes (``pytorch_lightning.trainer.setup``).
_PROFILERS = ("simple", "advanced", "pytorch", "xla")


def _profiler(v: Any) -> bool:
    """A value Lightning 2.x's ``profiler=`` takes: None, one of its names (any case), or an
    object (a Profiler: Lightning checks its type); not a number or another string."""
    if isinstance(v, str):
        return v.lower() in _PROFILERS
    return v is None or not isinstance(v, int | float)


def _is_callback(v: Any) -> bool:
    return callable(getattr(v, "on_train_epoch_end", None)) and not isinstance(v, type)


def _grad_norm(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    try:
        norm = float(v)
    except (TypeError, ValueError):
        return False
    return norm == -1 or (norm > 0 and not math.isnan(norm))


def _norm_text(v: Any) -> str:
    return "'inf'" if float(v) == math.inf else f"{float(v):g}"


def _path(v: Any) -> bool:
    return isinstance(v, str | os.PathLike)


def _progress(v: Any) -> str:
    if v == 0:
        return "enable_progress_bar=False"
    return f"callbacks=[TQDMProgressBar(refresh_rate={v})]"


def _summary(v: Any) -> str:
    return "enable_model_summary=False" if v is None else "callbacks=[ModelSummary(max_depth=-1)]"


def _checkpoint(v: Any) -> str:
    if isinstance(v, bool):
        return f"enable_checkpointing={v}"
    return f"callbacks=[{type(v).__name__}(...)]"


def _lr_find(v: Any) -> str:
    attr = "" if v is True else f", attr_name={v!r}"
    return f"Tuner(trainer).lr_find(model{attr}), which trainer.tune(model) runs"


def _scale(v: Any) -> str:
    mode = "power" if v is True else v
    return f"Tuner(trainer).scale_batch_size(model, mode={mode!r}), which trainer.tune(model) runs"


def _accumulate(v: Any) -> str:
    if v is None:
        return "accumulate_grad_batches=1"
    return f"callbacks=[GradientAccumulationScheduler(scheduling={dict(v)!r})]"


def _schedule(v: Any) -> bool:
    return v is None or (
        isinstance(v, Mapping) and all(_int(0)(e) and _int(1)(f) for e, f in v.items()) and bool(v)
    )


# int before str: jsonargparse tries them in order, and 1.x parsed --gpus 2 as a count.
_DEVICES = list[int] | int | str | None
_APEX = "NVIDIA Apex went with it"
_PRE_1 = "it was renamed"


def _renamed(name: str, new: str, example: Any) -> Row:
    """A keyword of Lightning 0.x, renamed before 1.0: refused, naming the new spelling
    (``new``: a template of the value ``v``)."""
    return Row(name, "1.0", "a value of Lightning 0.x", lambda v: True,
               lambda v: new.format(v=v), example, gone=_PRE_1)  # fmt: skip


#: The 1.x device keywords: the connector resolves them (both Trainers); here for the signature.
DEVICE_ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        Row("gpus", "2.0", "a count, GPU ids or None", lambda v: True,
            lambda v: f"accelerator='gpu', devices={v!r}", 2, default=None, annotation=_DEVICES),
        Row("num_processes", "2.0", "a count or None", lambda v: True,
            lambda v: f"accelerator='cpu', devices={v!r}", 2, default=None, noop=(1,),
            annotation=int | None),
    )
}  # fmt: skip

#: Every other 1.x keyword Lightning 2.x removed (or whose 1.x values it refuses), by name.
ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        Row("resume_from_checkpoint", "2.0", "a checkpoint path", _path,
            lambda v: f"trainer.fit(model, ckpt_path={str(v)!r})", "last.ckpt", default=None,
            annotation=str | Path | None),
        Row("progress_bar_refresh_rate", "1.7", "an int ≥ 0", _int(0), _progress, 0,
            default=None, noop=(1,), annotation=int | None),  # 1: Lightning's bar, every batch
        Row("process_position", "1.7", "an int ≥ 0", _int(0),
            lambda v: f"callbacks=[TQDMProgressBar(process_position={v})]", 1, default=0,
            annotation=int),
        Row("weights_summary", "1.7", "None, 'top' or 'full'", lambda v: v in (None, "top", "full"),
            _summary, None, default="top", annotation=str | None),
        Row("checkpoint_callback", "1.7", "True or False (before 1.3, also a ModelCheckpoint)",
            lambda v: _bool(v) or _is_callback(v), _checkpoint, False, default=None, noop=(True,),
            annotation=bool | None),
        Row("terminate_on_nan", "1.7", "True or False", _bool, lambda v: "detect_anomaly=True",
            True, default=None, noop=(False,), annotation=bool | None),
        Row("flush_logs_every_n_steps", "1.7", "an int ≥ 1", _int(1),
            lambda v: f"logger=CSVLogger(save_dir, flush_logs_every_n_steps={v})", 10,
            default=None, noop=(100,), annotation=int | None),
        Row("log_gpu_memory", "1.7", "None, 'min_max' or 'all'", lambda v: v in ("min_max", "all"),
            lambda v: "callbacks=[DeviceStatsMonitor()]", "all", default=None,
            annotation=str | None),
        Row("stochastic_weight_avg", "1.7", "True or False", _bool,
            lambda v: "pass callbacks=[StochasticWeightAveraging(swa_lrs=<your learning rate>)]",
            True, default=False, annotation=bool,
            gone="Lightning 2.x's StochasticWeightAveraging needs the SWA learning rate, which "
            "1.x took from the optimizer"),
        Row("prepare_data_per_node", "1.7", "True or False", _bool,
            lambda v: "self.prepare_data_per_node = False in the LightningModule and the "
            "LightningDataModule", False, default=None, noop=(True,), annotation=bool | None),
        Row("track_grad_norm", "2.0", "-1, a positive number or 'inf'", _grad_norm,
            lambda v: f"self.log_dict(grad_norm(self, norm_type={_norm_text(v)})) in "
            "on_before_optimizer_step", 2, default=-1, annotation=int | float | str),
        Row("auto_select_gpus", "2.0", "True or False", _bool,
            lambda v: "devices=find_usable_cuda_devices(<gpus>)", True, default=None,
            noop=(False,), annotation=bool | None),
        Row("tpu_cores", "2.0", "a count, core ids or None", lambda v: True,
            lambda v: f"pass accelerator='tpu', devices={v!r} and no 1.x device flag", 8,
            default=None, annotation=_DEVICES,
            gone="ddpkit's connector resolves CPUs and CUDA GPUs only"),
        Row("ipus", "2.0", "a count or None", lambda v: True,
            lambda v: f"install lightning-graphcore; pass accelerator=IPUAccelerator(), "
            f"devices={v!r}", 8, default=None, annotation=int | None,
            gone="IPUs moved to the lightning-graphcore package"),
        Row("move_metrics_to_cpu", "2.0", "True or False", _bool,
            lambda v: "drop it (call .cpu() on a tensor before self.log if GPU memory is short)",
            True, default=False, annotation=bool, gone="Lightning 2.x has no such switch"),
        Row("multiple_trainloader_mode", "2.0", "'max_size_cycle' or 'min_size'",
            lambda v: v in ("max_size_cycle", "min_size"),
            lambda v: "return CombinedLoader(loaders, mode='min_size') from train_dataloader()",
            "min_size", default="max_size_cycle", annotation=str,
            gone="Lightning 2.x takes the mode from the loader"),
        Row("amp_backend", "2.0", "'native' or 'apex'", lambda v: v in ("native", "apex"),
            lambda v: "drop it and pass precision='16-mixed' (torch's own AMP)", "apex",
            default=None, noop=("native",), annotation=str | None, gone=_APEX),
        # 1.x read amp_level only with amp_backend='apex' (refused above): every level is a no-op.
        Row("amp_level", "2.0", "an Apex optimization level ('O0' to 'O3') or None",
            lambda v: isinstance(v, str), lambda v: "drop it", "O1", default=None,
            noop=("O0", "O1", "O2", "O3"), annotation=str | None),
        Row("replace_sampler_ddp", "2.0", "True or False", _bool,
            lambda v: f"use_distributed_sampler={v}", False, default=True, annotation=bool),
        Row("reload_dataloaders_every_epoch", "1.6", "True or False", _bool,
            lambda v: "reload_dataloaders_every_n_epochs=1", True, default=False, annotation=bool),
        Row("truncated_bptt_steps", "1.5", "None or an int ≥ 1", _int(1),
            lambda v: "split the sequence in training_step, with manual optimization "
            "(self.automatic_optimization = False)", 4, default=None, noop=(0,),
            annotation=int | None,
            gone="truncated backpropagation through time went with it"),
        Row("distributed_backend", "1.5", "a training type: 'ddp', 'ddp_spawn', 'ddp_cpu', ...",
            lambda v: isinstance(v, str),
            lambda v: f"accelerator={v!r}, resolved with the device flags", "ddp", default=None,
            annotation=str | None),
        Row("automatic_optimization", "1.3", "True or False", _bool,
            lambda v: "self.automatic_optimization = False in your LightningModule", False,
            default=None, noop=(True,), annotation=bool | None),
        Row("enable_pl_optimizer", "1.3", "True or False", _bool, lambda v: "drop it", False,
            default=None, noop=(True,), annotation=bool | None,
            gone="Lightning 2.x always wraps optimizers in LightningOptimizer"),
        Row("weights_save_path", "1.8", "a folder path", _path,
            lambda v: f"pass callbacks=[ModelCheckpoint(dirpath={str(v)!r})]", "weights",
            default=None, annotation=str | None,
            gone="Lightning 2.x saves checkpoints where each ModelCheckpoint says"),
        Row("auto_lr_find", "2.0", "True, False or the name of the learning-rate attribute",
            lambda v: _bool(v) or (isinstance(v, str) and bool(v)), _lr_find, True, default=False,
            annotation=bool | str),
        Row("auto_scale_batch_size", "2.0", "False, True, 'power' or 'binsearch'",
            lambda v: _bool(v) or v in ("power", "binsearch"), _scale, True, default=False,
            annotation=bool | str),  # bool first: a CLI's "ON" / "No" parse as 1.x parsed them
        # Kept by Lightning 2.x, with some 1.x values removed (check: a 1.x-only value).
        Row("accumulate_grad_batches", "2.0", "an int ≥ 1, a {epoch: factor} schedule or None",
            _schedule, _accumulate, {0: 1, 4: 2}, default=None, kept=True,  # 1.5–1.9's default
            annotation=int | dict[int, int] | None, takes=("an int ≥ 1", _int(1))),
        Row("max_steps", "1.7", "an int ≥ -1 or None", lambda v: v is None,
            lambda v: "max_steps=-1", -1, noop=(None,), kept=True, annotation=int | None,
            takes=("an int ≥ -1", _int(-1))),
        Row("profiler", "1.3", "a profiler, its name, True, False or None", _bool,
            lambda v: "profiler='simple'" if v else "profiler=None", True, noop=(False,),
            kept=True, annotation=bool, takes=(
                f"a Profiler, None or one of {', '.join(map(repr, _PROFILERS))}", _profiler)),
        # Lightning 0.x's keywords, renamed before 1.0.
        _renamed("default_save_path", "default_root_dir={v!r}", "runs"),
        _renamed("early_stop_callback", "callbacks=[EarlyStopping(monitor='val_loss')]", True),
        _renamed("gradient_clip", "gradient_clip_val={v!r}", 0.5),
        _renamed("log_save_interval", "log_every_n_steps={v!r}", 50),
        _renamed("row_log_interval", "log_every_n_steps={v!r}", 50),
        _renamed("max_nb_epochs", "max_epochs={v!r}", 10),
        _renamed("min_nb_epochs", "min_epochs={v!r}", 1),
        _renamed("nb_sanity_val_steps", "num_sanity_val_steps={v!r}", 2),
        _renamed("num_tpu_cores", "accelerator='tpu', devices={v!r}", 8),
        _renamed("overfit_pct", "overfit_batches={v!r}", 0.1),
        _renamed("print_nan_grads", "detect_anomaly=True", True),
        _renamed("show_progress_bar", "enable_progress_bar={v!r}", False),
        _renamed("train_percent_check", "limit_train_batches={v!r}", 0.5),
        _renamed("val_percent_check", "limit_val_batches={v!r}", 0.5),
        _renamed("test_percent_check", "limit_test_batches={v!r}", 0.5),
        _renamed("use_amp", "precision='16-mixed'", True),
    )
}  # fmt: skip
