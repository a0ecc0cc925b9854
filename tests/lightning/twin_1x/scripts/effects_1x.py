"""What a 1.x run did, written so that two runs of the same script can be compared: the twin
tests run each script on real Lightning 1.9.5 and on ``python -m ddpkit.lightning``.

Lightning 1.x code, as a 1.x project's own helper module would be: it imports
``pytorch_lightning`` and is ported with the script on ddpkit's side. :class:`HookRecorder` is a
callback with 1.9's hook signatures, and :func:`record` is what the scripts' modules call from
their own hooks; every call lands, in order, in one file per rank (a spawned rank has no way
back to the parent's memory). :func:`write_effects` gathers the rest at the end (rank 0 only).
"""

import csv
import json
import os
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning import Callback


def shape(value: Any) -> str:
    """The kind and shape of a hook's argument, without its numbers: ``Tensor[4,3]``,
    ``dict{loss:Tensor[]}``, ``list[4]<dict{loss:Tensor[]}>``; plain values as themselves (a
    NumPy scalar as the Python one it holds)."""
    if value is None:
        return "None"
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, torch.Tensor):
        return f"Tensor[{','.join(str(n) for n in value.shape)}]"
    if isinstance(value, dict):
        return "dict{" + ",".join(f"{k}:{shape(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list | tuple):
        inner = "|".join(sorted({shape(v) for v in value}))
        return f"{type(value).__name__}[{len(value)}]<{inner}>"
    if isinstance(value, bool | int | float | str):
        return repr(value)
    return type(value).__name__


def record(folder: str, rank: int, who: str, hook: str, **arguments: Any) -> None:
    """One hook call, appended to ``folder/hooks.rank<rank>.jsonl``."""
    line = {"call": f"{who}.{hook}", "args": {k: shape(v) for k, v in arguments.items()}}
    with open(os.path.join(folder, f"hooks.rank{rank}.jsonl"), "a") as fh:
        fh.write(json.dumps(line, sort_keys=True) + "\n")


class HookRecorder(Callback):
    """Every Callback hook Lightning 1.9 still calls, with 1.9's signature, recorded."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def _record(self, trainer: pl.Trainer, hook: str, **arguments: Any) -> None:
        record(self.folder, trainer.global_rank, "callback", hook, **arguments)

    def setup(self, trainer, pl_module, stage):
        self._record(trainer, "setup", stage=stage)

    def teardown(self, trainer, pl_module, stage):
        self._record(trainer, "teardown", stage=stage)

    def on_fit_start(self, trainer, pl_module):
        self._record(trainer, "on_fit_start")

    def on_fit_end(self, trainer, pl_module):
        self._record(trainer, "on_fit_end")

    def on_sanity_check_start(self, trainer, pl_module):
        self._record(trainer, "on_sanity_check_start")

    def on_sanity_check_end(self, trainer, pl_module):
        self._record(trainer, "on_sanity_check_end")

    def on_train_start(self, trainer, pl_module):
        self._record(trainer, "on_train_start")

    def on_train_end(self, trainer, pl_module):
        self._record(trainer, "on_train_end")

    def on_train_epoch_start(self, trainer, pl_module):
        self._record(trainer, "on_train_epoch_start", epoch=trainer.current_epoch)

    def on_train_epoch_end(self, trainer, pl_module):
        self._record(trainer, "on_train_epoch_end", epoch=trainer.current_epoch)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._record(trainer, "on_train_batch_start", batch=batch, batch_idx=batch_idx)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._record(
            trainer, "on_train_batch_end", outputs=outputs, batch_idx=batch_idx,
            global_step=trainer.global_step,
        )  # fmt: skip

    def on_validation_start(self, trainer, pl_module):
        self._record(trainer, "on_validation_start")

    def on_validation_end(self, trainer, pl_module):
        self._record(trainer, "on_validation_end")

    def on_validation_epoch_start(self, trainer, pl_module):
        self._record(trainer, "on_validation_epoch_start")

    def on_validation_epoch_end(self, trainer, pl_module):
        self._record(trainer, "on_validation_epoch_end", global_step=trainer.global_step)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self._record(
            trainer, "on_validation_batch_start", batch_idx=batch_idx,
            dataloader_idx=dataloader_idx,
        )  # fmt: skip

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0
    ):
        self._record(trainer, "on_validation_batch_end", outputs=outputs, batch_idx=batch_idx)

    def on_test_start(self, trainer, pl_module):
        self._record(trainer, "on_test_start")

    def on_test_end(self, trainer, pl_module):
        self._record(trainer, "on_test_end")

    def on_test_epoch_start(self, trainer, pl_module):
        self._record(trainer, "on_test_epoch_start")

    def on_test_epoch_end(self, trainer, pl_module):
        self._record(trainer, "on_test_epoch_end")

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self._record(trainer, "on_test_batch_start", batch_idx=batch_idx)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._record(trainer, "on_test_batch_end", outputs=outputs, batch_idx=batch_idx)

    def on_predict_start(self, trainer, pl_module):
        self._record(trainer, "on_predict_start")

    def on_predict_end(self, trainer, pl_module):
        self._record(trainer, "on_predict_end")

    def on_predict_epoch_start(self, trainer, pl_module):
        self._record(trainer, "on_predict_epoch_start")

    def on_predict_epoch_end(self, trainer, pl_module, outputs):
        self._record(trainer, "on_predict_epoch_end", outputs=outputs)

    def on_predict_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self._record(trainer, "on_predict_batch_start", batch_idx=batch_idx)

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._record(trainer, "on_predict_batch_end", outputs=outputs, batch_idx=batch_idx)

    def on_before_backward(self, trainer, pl_module, loss):
        self._record(trainer, "on_before_backward", loss=loss)

    def on_after_backward(self, trainer, pl_module):
        self._record(trainer, "on_after_backward")

    def on_before_optimizer_step(self, trainer, pl_module, optimizer, opt_idx):
        self._record(trainer, "on_before_optimizer_step", opt_idx=opt_idx)

    def on_before_zero_grad(self, trainer, pl_module, optimizer):
        self._record(trainer, "on_before_zero_grad")

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        self._record(trainer, "on_save_checkpoint", keys=",".join(sorted(checkpoint)))

    def on_load_checkpoint(self, trainer, pl_module, checkpoint):
        self._record(trainer, "on_load_checkpoint", keys=",".join(sorted(checkpoint)))

    def on_exception(self, trainer, pl_module, exception):
        self._record(trainer, "on_exception", exception=type(exception).__name__)


def weights(module: torch.nn.Module) -> dict[str, list[float]]:
    """Every tensor of the state dict, flattened."""
    return {k: v.detach().double().flatten().tolist() for k, v in module.state_dict().items()}


def _number(text: str) -> float | str | None:
    if text == "":
        return None
    try:
        return float(text)
    except ValueError:
        return text


def csv_rows(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """The rows of every ``metrics.csv`` under ``folder``, by path; empty cells left out."""
    found = {}
    for path in sorted(folder.rglob("metrics.csv")):
        with open(path, newline="") as fh:
            rows = [
                {k: _number(v) for k, v in row.items() if v != ""} for row in csv.DictReader(fh)
            ]
        found[str(path.relative_to(folder))] = rows
    return found


def checkpoints(folder: Path) -> dict[str, dict[str, Any]]:
    """Each checkpoint under ``folder``: its top-level keys, its ``state_dict`` keys, its epoch
    and step."""
    found = {}
    for path in sorted(folder.rglob("*.ckpt")):
        saved = torch.load(path, map_location="cpu", weights_only=False)
        found[str(path.relative_to(folder))] = {
            "keys": sorted(saved),
            "state_dict": sorted(saved.get("state_dict", {})),
            "epoch": saved.get("epoch"),
            "global_step": saved.get("global_step"),
            "callbacks": sorted(str(k) for k in saved.get("callbacks", {})),
            "hyper_parameters": shape(dict(saved.get("hyper_parameters", {}))),
        }
    return found


def hook_calls(folder: Path, rank: int = 0) -> list[str]:
    """The hook calls of ``rank``, in order, as ``who.hook(name=shape, ...)``."""
    path = folder / f"hooks.rank{rank}.jsonl"
    if not path.exists():
        return []
    calls = []
    for line in path.read_text().splitlines():
        item = json.loads(line)
        arguments = ", ".join(f"{k}={v}" for k, v in sorted(item["args"].items()))
        calls.append(f"{item['call']}({arguments})")
    return calls


def plain(value: Any) -> Any:
    """``value`` as JSON: tensors as numbers or lists, everything else unknown as its repr."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value.tolist()
    if isinstance(value, dict | Namespace):
        items = vars(value) if isinstance(value, Namespace) else value
        return {str(k): plain(v) for k, v in items.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def trainer_facts(trainer: pl.Trainer) -> dict[str, Any]:
    """What the Trainer was built to do."""
    return {
        "max_epochs": trainer.max_epochs,
        "max_steps": trainer.max_steps,
        "accumulate_grad_batches": trainer.accumulate_grad_batches,
        "gradient_clip_val": trainer.gradient_clip_val,
        "limit_train_batches": trainer.limit_train_batches,
        "limit_val_batches": trainer.limit_val_batches,
        "val_check_interval": trainer.val_check_interval,
        "check_val_every_n_epoch": trainer.check_val_every_n_epoch,
        "num_devices": trainer.num_devices,
        "world_size": trainer.world_size,
        "accelerator": type(trainer.accelerator).__name__,
        "optimizers": len(trainer.optimizers),
        "callbacks": [type(c).__name__ for c in trainer.callbacks],
        "loggers": [type(lg).__name__ for lg in trainer.loggers],
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }


def write_effects(path: str, trainer: pl.Trainer, model: torch.nn.Module, **extra: Any) -> None:
    """The effects of the run, as JSON at ``path``: only where ``trainer.global_rank`` is 0."""
    if trainer.global_rank != 0:
        return
    folder = Path(path).parent
    effects = {
        "weights": weights(model),
        "callback_metrics": plain(dict(trainer.callback_metrics)),
        "csv": csv_rows(folder),
        "checkpoints": checkpoints(folder),
        "hooks": hook_calls(folder),
        "global_step": trainer.global_step,
        "current_epoch": trainer.current_epoch,
        "trainer": trainer_facts(trainer),
        **{k: plain(v) for k, v in extra.items()},
    }
    Path(path).write_text(json.dumps(effects, indent=1, sort_keys=True))


class RecordingModule(pl.LightningModule):
    """A LightningModule that records the module hooks Lightning 1.9 still calls, with 1.9's
    signatures (``record_folder`` set by the script, carried into spawned ranks with it)."""

    record_folder: str | None = None

    def _record(self, hook: str, **arguments: Any) -> None:
        if self.record_folder:
            record(self.record_folder, self.trainer.global_rank, "module", hook, **arguments)

    def setup(self, stage=None):
        self._record("setup", stage=stage)

    def teardown(self, stage=None):
        self._record("teardown", stage=stage)

    def on_fit_start(self):
        self._record("on_fit_start")

    def on_fit_end(self):
        self._record("on_fit_end")

    def on_train_start(self):
        self._record("on_train_start")

    def on_train_end(self):
        self._record("on_train_end")

    def on_train_epoch_start(self):
        self._record("on_train_epoch_start")

    def on_train_epoch_end(self):
        self._record("on_train_epoch_end")

    def on_train_batch_start(self, batch, batch_idx):
        self._record("on_train_batch_start", batch_idx=batch_idx)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self._record("on_train_batch_end", outputs=outputs, batch_idx=batch_idx)

    def on_validation_epoch_start(self):
        self._record("on_validation_epoch_start")

    def on_validation_epoch_end(self):
        self._record("on_validation_epoch_end")

    def on_test_epoch_start(self):
        self._record("on_test_epoch_start")

    def on_test_epoch_end(self):
        self._record("on_test_epoch_end")

    def on_predict_epoch_end(self, results):
        self._record("on_predict_epoch_end", results=results)

    def on_before_backward(self, loss):
        self._record("on_before_backward", loss=loss)

    def on_after_backward(self):
        self._record("on_after_backward")

    def on_before_optimizer_step(self, optimizer, optimizer_idx):
        self._record("on_before_optimizer_step", optimizer_idx=optimizer_idx)

    def on_before_zero_grad(self, optimizer):
        self._record("on_before_zero_grad")

    def on_save_checkpoint(self, checkpoint):
        self._record("on_save_checkpoint")

    def on_load_checkpoint(self, checkpoint):
        self._record("on_load_checkpoint")
