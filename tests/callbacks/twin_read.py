"""What a Lightning twin run (tests/callbacks/lightning_twin.py) leaves behind, read into plain,
comparable values: a recording logger, a callback that records what the trainer shows at every
hook, the trainer after the stage, and every checkpoint file's contents."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

#: decimals every float is rounded to: as good as exact (a float32 has about 7 significant
#: digits). ddpkit's epoch values are accumulated with Lightning's arithmetic, so they agree to
#: the last bit; with ddpkit's earlier float64 means, 6 decimals failed 20 cases (4 hid that).
DECIMALS = 12

#: what a callback reads from the trainer, at every hook the watching callback sees
AT_HOOKS = (
    "current_epoch",
    "global_step",
    "sanity_checking",
    "training",
    "validating",
    "testing",
    "predicting",
    "num_training_batches",
    "num_val_batches",
    "num_sanity_val_batches",
    "num_test_batches",
    "num_predict_batches",
    "is_last_batch",
    "should_stop",
    "callback_metrics",
    "progress_bar_metrics",
    "logged_metrics",
    "optimizers",
    "lr_scheduler_configs",
)

#: Lightning's callback hooks: the watching callback records at each one
CALLBACK_HOOKS = (
    "setup",
    "on_fit_start",
    "on_sanity_check_start",
    "on_sanity_check_end",
    "on_train_start",
    "on_train_epoch_start",
    "on_train_batch_start",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_train_batch_end",
    "on_train_epoch_end",
    "on_train_end",
    "on_validation_start",
    "on_validation_epoch_start",
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_validation_epoch_end",
    "on_validation_end",
    "on_test_start",
    "on_test_epoch_start",
    "on_test_batch_start",
    "on_test_batch_end",
    "on_test_epoch_end",
    "on_test_end",
    "on_predict_start",
    "on_predict_epoch_start",
    "on_predict_batch_start",
    "on_predict_batch_end",
    "on_predict_epoch_end",
    "on_predict_end",
    "on_save_checkpoint",
    "on_load_checkpoint",
    "on_exception",
    "on_fit_end",
    "teardown",
)

#: the hook at which each stage has started (recorded in ``Effects.stages``)
STAGE_STARTS = {
    "on_fit_start": "fit",
    "on_validation_start": "validate",
    "on_test_start": "test",
    "on_predict_start": "predict",
}


_DIGITS = re.compile(r"\d+\.\d{5,}")


def plain(value: Any, root: Path | None = None) -> Any:
    """``value`` as plain, comparable data: tensors and floats rounded, paths under ``root``
    written ``<root>/...``, enums by name, containers recursively, other objects by type."""
    if isinstance(value, torch.Tensor):
        return plain(value.tolist(), root) if value.dim() else round(float(value), DECIMALS)
    if isinstance(value, bool | int | type(None)):
        return value
    if isinstance(value, float):
        return round(value, DECIMALS)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, str | Path):
        text = str(value).replace(str(root), "<root>") if root is not None else str(value)
        # a number in a message, rounded as any other (EarlyStopping's "val_loss = 2.96854...")
        return _DIGITS.sub(lambda m: str(round(float(m.group()), DECIMALS)), text)
    if isinstance(value, dict):
        return {
            plain(k, root): plain(v, root)
            for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
        }
    if isinstance(value, list | tuple):
        return [plain(v, root) for v in value]
    return type(value).__name__


def _read_at_hook(trainer: Any, name: str) -> Any:
    try:
        value = getattr(trainer, name)
    except Exception as error:  # what the trainer shows is compared, a refusal included
        return f"<{type(error).__name__}>"
    if name in ("optimizers", "lr_scheduler_configs"):
        return len(value)
    return plain(dict(value) if name.endswith("metrics") else value)


def _lrs(trainer: Any) -> list[list[float]]:
    try:
        return [[round(g["lr"], 6) for g in o.param_groups] for o in trainer.optimizers]
    except Exception as error:  # no optimizers yet (setup) reads differently; compared too
        return [[f"<{type(error).__name__}>"]]  # type: ignore[list-item]


def watching_callback(base: type, store: Any) -> Any:
    """Records, at every callback hook, what a callback would read from the trainer:
    ``store.seen`` gets (hook, the batch index or stage argument, {:data:`AT_HOOKS`' names and
    "lrs", the learning rates: their values}), and ``store.stages[-1]`` the stages that
    started."""

    def make(hook: str) -> Callable[..., None]:
        def watch(self: Any, trainer: Any, pl_module: Any, *args: Any, **kwargs: Any) -> None:
            given = [*args, kwargs.get("stage"), kwargs.get("batch_idx")]
            arg: Any = next((a for a in given if isinstance(a, int | str)), None)
            if hook == "on_exception":
                arg = "exception"  # its type and message: Effects.error
            values = {name: _read_at_hook(trainer, name) for name in AT_HOOKS}
            if hook == "on_train_start":  # where a scheduler sized by it would read it
                values["estimated_stepping_batches"] = _read_at_hook(
                    trainer, "estimated_stepping_batches"
                )
            values["lrs"] = _lrs(trainer)
            store.seen.append((hook, arg, values))
            if hook in STAGE_STARTS and store.stages:
                fn = trainer.state.fn
                fn = str(getattr(fn, "value", fn))
                if hook == "on_fit_start" or fn == STAGE_STARTS[hook]:
                    store.stages[-1][1].append(STAGE_STARTS[hook])

        return watch

    return type("Watching", (base,), {hook: make(hook) for hook in CALLBACK_HOOKS})()


def recording_logger(base: type, store: Any) -> Any:
    class Recording(base):  # type: ignore[misc, valid-type]
        @property
        def name(self) -> str:
            return "twin"

        @property
        def version(self) -> int:
            return 0

        def log_metrics(self, metrics: Any, step: Any = None) -> None:
            store.rows.append((step, plain(dict(metrics))))

        def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
            store.hparams.append(dict(vars(params) if hasattr(params, "__dict__") else params))

    return Recording()


def _position_lightning(loops: dict[str, Any]) -> tuple[int, int]:
    fit = loops["fit_loop"]
    epochs = fit["epoch_progress"]["current"]
    batches = fit["epoch_loop.batch_progress"]
    if batches["is_last_batch"] and epochs["ready"] > epochs["completed"]:
        return epochs["completed"] + 1, 0  # a started epoch's batches all trained: the next
    return epochs["completed"], 0 if batches["is_last_batch"] else batches["current"]["processed"]


def _position_ddpkit(loops: dict[str, Any], batches_per_epoch: Any) -> tuple[int, int]:
    epochs, batches = loops["epochs_completed"], loops["epoch_batches"]
    if batches and batches == batches_per_epoch:
        return epochs + 1, 0
    return epochs, batches


#: top-level checkpoint keys ddpkit writes on purpose and Lightning does not: its own version
#: (beside Lightning's), its precision plugin's state (Lightning keeps it under the plugin's
#: class name, and only when not empty) and every rank's RNG states, which a restarted fit sets
#: back (docs/training.md, "restarts")
DDPKIT_ONLY_KEYS = frozenset({"ddpkit_version", "precision", "ddpkit_rng"})


def checkpoint_contents(path: Path, root: Path, batches_per_epoch: Any) -> dict[str, Any]:
    """What must agree in one checkpoint file. The two loops' states differ in layout on purpose
    (Lightning's progress trackers; ddpkit's epochs completed and batches into the epoch): both
    are read as the position a resume starts at (epochs done, batches into the next)."""
    if path.is_symlink():
        return {"link": str(Path(path.readlink()).name)}
    found = torch.load(path, weights_only=False, map_location="cpu")
    out: dict[str, Any] = {
        "keys": sorted(set(found) - DDPKIT_ONLY_KEYS),
    }
    for key in ("epoch", "global_step", "state_dict", "optimizer_states", "lr_schedulers"):
        out[key] = plain(found.get(key), root)
    out["callbacks"] = plain(found.get("callbacks"), root)
    for key in ("hyper_parameters", "hparams_name", "datamodule_hyper_parameters"):
        if key in found:
            out[key] = plain(found[key], root)
    loops = found.get("loops")
    if loops is not None:
        out["position"] = (
            _position_lightning(loops)
            if "fit_loop" in loops
            else _position_ddpkit(loops, batches_per_epoch)
        )
    return out


def checkpoints(root: Path, batches_per_epoch: Any) -> dict[str, Any]:
    """Every ``*.ckpt`` under ``root``, by its path below it."""
    return {
        str(p.relative_to(root)): checkpoint_contents(p, root, batches_per_epoch)
        for p in sorted(root.rglob("*.ckpt"))
    }


def state_of(trainer: Any) -> tuple[Any, ...]:
    state = trainer.state
    return (
        str(getattr(state.fn, "value", state.fn)),
        str(getattr(state.status, "value", state.status)),
        state.finished,
        state.stopped,
    )


def callback_state(callback: Any) -> dict[str, Any] | None:
    """EarlyStopping's and ModelCheckpoint's state (file names without their folder, a link as
    ``name -> target``)."""
    if hasattr(callback, "stopped_epoch"):
        return {
            "stopped_epoch": callback.stopped_epoch,
            "wait_count": callback.wait_count,
            "best_score": round(float(callback.best_score), DECIMALS),
            "reason": callback.stopping_reason.name,
        }
    if not hasattr(callback, "best_k_models"):
        return None
    folder = Path(callback.dirpath) if callback.dirpath else None

    def shown(p: Path) -> str:
        return f"{p.name} -> {Path(p.readlink()).name}" if p.is_symlink() else p.name

    return {
        "best": Path(callback.best_model_path).name,
        "last": Path(callback.last_model_path).name,
        "kth": Path(callback.kth_best_model_path).name,
        "best_k": {
            Path(k).name: round(float(v), DECIMALS) for k, v in callback.best_k_models.items()
        },
        "score": None
        if callback.best_model_score is None
        else round(float(callback.best_model_score), DECIMALS),
        "files": sorted(shown(p) for p in folder.iterdir()) if folder and folder.is_dir() else [],
    }
