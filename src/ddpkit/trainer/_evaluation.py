"""Validation, test and prediction epochs, with Lightning's hooks in Lightning's order.

An evaluation epoch: ``on_{stage}_model_eval``, ``on_{stage}_start``, ``on_{stage}_epoch_start``,
per batch ``on_{stage}_batch_start`` / the step / ``on_{stage}_batch_end``, then
``on_{stage}_epoch_end``, the epoch's metrics to the loggers, ``on_{stage}_end`` and
``on_{stage}_model_train``. The sanity check runs the same epoch with logging off.

``trainer.validate()`` and ``trainer.test()`` then print the results table (``verbose=True``),
in Lightning's plain layout (``pytorch_lightning.loops.evaluation_loop._print_results`` without
rich): a rule, ``Test metric`` and ``DataLoader 0`` centred in columns, a rule, one row a metric
in name order, a rule.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import pickle
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ddpkit.callbacks._dispatch import module_hook
from ddpkit.errors import DDPKitDeprecationWarning, MisconfigurationError
from ddpkit.plugins.training_type._base import TrainingTypePlugin
from ddpkit.trainer._context import StageContext
from ddpkit.trainer._data import num_batches
from ddpkit.utilities._rank_zero import rank_zero_warn

_NAMES = {"validate": "validation", "test": "test", "predict": "predict"}


def warn_legacy_hook(model: Any, name: str, modern: str) -> Any:
    """A 1.x hook the user's class defines, with the warning naming its 2.x replacement."""
    hook = module_hook(model, name)
    if hook is not None:
        rank_zero_warn(
            f"{type(model).__name__}.{name} is a Lightning 1.x hook (removed in 2.0); ddpkit "
            f"still calls it. The same, spelled today: {modern}.",
            DDPKitDeprecationWarning,
        )
    return hook


def no_grad(ctx: StageContext) -> contextlib.AbstractContextManager[Any]:
    return torch.inference_mode() if ctx.config.inference_mode else torch.no_grad()


def log_epoch_row(ctx: StageContext, values: dict[str, float]) -> None:
    """An epoch's values to every logger (on every rank: a ddpkit logger writes on rank 0)."""
    if not values:
        return
    ctx.state.epoch_rows += 1
    log_row(ctx, values)


def log_row(ctx: StageContext, values: Mapping[str, float]) -> None:
    """A row of a training step or of an epoch to every logger, by Lightning 2.x's rule
    (``LoggerConnector.log_metrics`` with no step given): a value logged as ``"step"`` is not a
    metric but the row's step (an int), and the row gets no ``"epoch"``; otherwise the row is
    logged at the batches that stepped, with ``"epoch"`` unless the module logged one."""
    state = ctx.state
    row = dict(values)
    logged_step = row.pop("step", None)
    if logged_step is not None:
        step = int(logged_step)
    else:
        row.setdefault("epoch", state.current_epoch)
        step = state.batches_stepped
    for logger in state.loggers:
        logger.log_metrics(row, step=step)


def _mode(model: Any) -> dict[Any, bool]:
    return {m: m.training for m in model.modules()} if hasattr(model, "modules") else {}


def _restore(mode: dict[Any, bool]) -> None:
    for module, training in mode.items():
        module.training = training


def evaluate(
    ctx: StageContext, stage: str, loader: Any, limit: int | float | None, *, sanity: bool = False
) -> dict[str, float]:
    """One evaluation epoch (``stage``: "validate" or "test"); returns its epoch values."""
    model, dispatch, metrics = ctx.model, ctx.dispatch, ctx.state.metrics
    name = _NAMES[stage]
    step = module_hook(model, f"{name}_step")
    n = num_batches(loader, limit, "val" if stage == "validate" else "test")
    if step is None or n == 0:
        return {}
    step_end = warn_legacy_hook(model, f"{name}_step_end", f"do that work in {name}_step")
    epoch_end = warn_legacy_hook(
        model, f"{name}_epoch_end", f"collect outputs in {name}_step and use on_{name}_epoch_end()"
    )
    if not sanity:
        _count_batches(ctx, stage, n)
    # a fit's validation runs inside the training epoch: its batch state comes back after it
    previous = (metrics.stage, metrics.step_level, metrics.in_batches)
    metrics.stage, metrics.step_level, metrics.sanity = stage, False, sanity
    mode = _mode(model)
    # The whole epoch, its hooks too, under no_grad / inference_mode (Lightning's loop is).
    with no_grad(ctx):
        if module_hook(model, f"on_{name}_model_eval") is not None:
            dispatch.call_module(f"on_{name}_model_eval")
        else:
            model.eval()
        dispatch.call(f"on_{name}_start")
        dispatch.call(f"on_{name}_epoch_start")
        bar = ctx.state.progress
        bar.start(n, "sanity check" if sanity else stage)
        keep = epoch_end is not None
        outputs = _batches(ctx, name, loader, n, step, step_end, keep=keep, sanity=sanity)
        bar.close()
        values = _close_epoch(ctx, stage, name, sanity, lambda: epoch_end and epoch_end(outputs))
        metrics.stage, metrics.step_level, metrics.in_batches = previous
        metrics.sanity = False
        dispatch.call(f"on_{name}_end")
        if module_hook(model, f"on_{name}_model_train") is not None:
            dispatch.call_module(f"on_{name}_model_train")
        else:
            _restore(mode)
    return values


def _count_batches(ctx: StageContext, stage: str, n: int | None) -> None:
    """``trainer.num_val_batches`` / ``num_test_batches`` of the running epoch (Lightning's:
    one count per loader, ``inf`` for a loader without a length)."""
    counts: list[int | float] = [math.inf if n is None else n]
    state = ctx.state
    if stage == "validate" and state.status.fn != "fit":
        state.validate_batches = counts
    elif stage == "validate":
        state.num_val_batches = counts
        # the fit loop's validation progress (its checkpoints')
        state.val_batches = (state.val_batches[0] + (n or 0), n or 0)
    else:
        ctx.state.num_test_batches = counts


def _batches(
    ctx: StageContext,
    name: str,
    loader: Any,
    n: int | None,
    step: Any,
    step_end: Any,
    *,
    keep: bool,
    sanity: bool,
) -> list[Any]:
    """The epoch's batches with their hooks; the step outputs when ``keep`` (1.x epoch ends)."""
    dispatch, bar = ctx.dispatch, ctx.state.progress
    batch_start = dispatch.hooks(f"on_{name}_batch_start")
    batch_end = dispatch.hooks(f"on_{name}_batch_end")
    metrics = ctx.state.metrics
    bar_values = metrics.bar_values
    step_name = f"{name}_step"  # the hook its batch hooks log as
    outputs: list[Any] = []
    for batch_idx, raw in enumerate(loader):
        if n is not None and batch_idx >= n:
            break
        batch = metrics.batch = ctx.batch(raw)
        metrics.fx = step_name
        for hook in batch_start:
            hook(batch, batch_idx)
        if ctx.plain_forward:
            out = step(batch, batch_idx)
        else:
            with ctx.precision.forward_context():
                out = step(batch, batch_idx)
        if step_end is not None:
            out = step_end(out)
        if keep:
            outputs.append(out)
        for hook in batch_end:
            hook(out, batch, batch_idx)
        metrics.batch = metrics.fx = None
        if not sanity:
            _eval_step_row(ctx)
        bar.update(bar_values)
    return outputs


def _eval_step_row(ctx: StageContext) -> None:
    """The batch's ``on_step`` values to the loggers, at the number of batches the loader gave
    before it (Lightning's ``update_eval_step_metrics``: a fit's validations count on)."""
    state = ctx.state
    seen = state.eval_rows_seen
    state.eval_rows_seen = seen + 1
    pending = state.metrics.eval_step_row
    if not pending:
        return
    row = {name: float(value) for name, value in pending.items()}
    for logger in ctx.state.loggers:
        logger.log_metrics(row, step=seen)


def _close_epoch(
    ctx: StageContext, stage: str, name: str, sanity: bool, legacy_epoch_end: Callable[[], Any]
) -> dict[str, float]:
    """The epoch's values published before the epoch-end hooks (the 1.x ``{name}_epoch_end``,
    then ``on_{name}_epoch_end``), so they read them in ``trainer.callback_metrics``, and what
    those hooks log as it is logged; then the epoch's row goes to the loggers."""
    metrics = ctx.state.metrics
    values = metrics.end_epoch(stage, closing=True)
    legacy_epoch_end()
    ctx.dispatch.call(f"on_{name}_epoch_end")
    values.update(metrics.end_epoch(stage))
    if sanity:
        return {}  # the sanity check's values go to no logger
    log_epoch_row(ctx, values)
    return values


def predict(
    ctx: StageContext, loader: Any, limit: int | float | None, keep: bool
) -> list[Any] | None:
    """Every batch's prediction, in the dataset's order, on every rank (the ranks' contiguous
    shards gathered one after another); None when ``keep`` is False."""
    model, dispatch = ctx.model, ctx.dispatch
    n = num_batches(loader, limit, "predict")
    ctx.state.num_predict_batches = [math.inf if n is None else n]
    step = module_hook(model, "predict_step")
    mode = _mode(model)
    if module_hook(model, "on_predict_model_eval") is not None:
        dispatch.call_module("on_predict_model_eval")
    else:
        model.eval()
    dispatch.call("on_predict_start")
    dispatch.call("on_predict_epoch_start")
    batch_start, batch_end = (
        dispatch.hooks("on_predict_batch_start"),
        dispatch.hooks("on_predict_batch_end"),
    )
    out: list[Any] = []
    ctx.state.metrics.fx = "predict_step"  # where Lightning refuses self.log
    with no_grad(ctx):
        for batch_idx, raw in enumerate(loader):
            if n is not None and batch_idx >= n:
                break
            batch = ctx.batch(raw)
            for hook in batch_start:
                hook(batch, batch_idx)
            with ctx.precision.forward_context():
                pred = step(batch, batch_idx) if step is not None else model(batch)
            for hook in batch_end:
                hook(pred, batch, batch_idx)
            if keep:
                out.append(to_cpu(pred))
    ctx.state.metrics.fx = None
    dispatch.call("on_predict_epoch_end")
    dispatch.call("on_predict_end")
    _restore(mode)
    if not keep:
        return None
    gathered = gather_predictions(ctx.plugin, out)
    return [p for rank_predictions in gathered for p in rank_predictions]


def gather_predictions(plugin: TrainingTypePlugin, mine: list[Any]) -> list[list[Any]]:
    """Every rank's predictions, in rank order. They travel as ``torch.save`` bytes and are read
    with ``torch.load(weights_only=True)``, which builds tensors and plain containers only: no
    code runs from another rank's bytes (ddpkit's own exchanges never unpickle)."""
    if plugin.world_size == 1:
        return [mine]
    buffer = io.BytesIO()
    torch.save(mine, buffer)
    gathered = plugin.all_gather_bytes(buffer.getvalue())
    out: list[list[Any]] = []
    for rank, data in enumerate(gathered):
        if rank == plugin.global_rank:
            out.append(mine)
            continue
        try:
            out.append(torch.load(io.BytesIO(data), weights_only=True))
        except pickle.UnpicklingError as err:
            found = re.search(r"GLOBAL (\S+)", str(err))
            what = found.group(1) if found else "an object"
            raise MisconfigurationError(
                f"Trainer.predict: rank {rank}'s predictions hold {what}, which "
                f"torch.load(weights_only=True) does not build. ddpkit gathers the "
                f"ranks' predictions that way, so that no code runs from another rank's bytes. "
                f"Fix: return tensors, numbers, strings, or lists, tuples and dicts of them from "
                f"predict_step (or register your class: "
                f"torch.serialization.add_safe_globals([YourClass]))."
            ) from None
    return out


def to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_cpu(v) for v in value)
    return value


# -- the results table ------------------------------------------------------------------------


def _bar_character() -> str:
    encoding = sys.stdout.encoding
    try:
        if encoding is not None:
            "─".encode(encoding)
    except UnicodeEncodeError:
        return "-"
    return "─"


def format_results(results: Sequence[Mapping[str, Any]], stage: str) -> str | None:
    """The table's lines for ``results`` (one dict a loader), or None with nothing to show."""
    names = sorted({name for result in results for name in result})
    if not names:
        return None
    headers = [f"DataLoader {i}" for i in range(len(results))]
    term_size = shutil.get_terminal_size(fallback=(120, 30)).columns or 120
    width = int(min(max(len(max(names, key=len)), len(max(headers, key=len)), 25), term_size / 2))
    rows = [[f"{result[name]}" if name in result else " " for result in results] for name in names]
    columns = max(1, int((term_size - width) / width))
    bar = _bar_character() * term_size
    half = int(term_size / 2)
    lines: list[str] = []
    for start in range(0, len(headers), columns):
        table_headers = [f"{stage} Metric".capitalize(), *headers[start : start + columns]]
        row_format = f"{{:^{width}}}" * len(table_headers)
        lines += [bar, row_format.format(*table_headers).rstrip(), bar]
        for name, row in zip(names, rows, strict=True):
            cells = row[start : start + columns]
            if len(name) <= half:
                lines.append(row_format.format(name, *cells).rstrip())
                continue
            metric = name  # a long name wraps over several lines, as Lightning wraps it
            while len(metric) > half:
                lines.append(row_format.format(metric[:half], *cells).rstrip())
                metric = metric[half:]
            lines.append(row_format.format(metric, *[" "] * len(cells)).rstrip())
        lines.append(bar)
    return os.linesep.join(lines)


def print_results(results: Sequence[Mapping[str, Any]], stage: str) -> None:
    text = format_results(results, stage)
    if text is not None:
        print(text)
