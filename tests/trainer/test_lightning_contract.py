"""What a Lightning user relies on, row by row, where tests/callbacks/test_same_as_lightning.py
does not show it by running Lightning beside: a misspelt ``self.log`` keyword, ``seed_everything``
with ``workers=True``, 1.x epoch-end hooks reading the epoch's values, the plugin hooks 1.x
subclasses override, and a folder the run cannot write refused before training."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader
from trainer_models import Recorder, regression_data

import ddpkit
from ddpkit import MisconfigurationError, Trainer
from ddpkit.plugins.training_type.single_device import SingleDevicePlugin


def quiet(root: Path, **kwargs: Any) -> dict[str, Any]:
    return {"default_root_dir": root, "logger": False, "enable_checkpointing": False,
            "enable_progress_bar": False, "enable_model_summary": False, **kwargs}  # fmt: skip


def test_a_misspelt_log_keyword_is_a_type_error(tmp_path: Path) -> None:
    """Lightning's signature: ``sync_dits=True`` was swallowed (the metric went unsynced)."""

    class Typo(Recorder):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            self.log("loss", loss, sync_dits=True)
            return loss

    with pytest.raises(TypeError, match="sync_dits"):
        Trainer(**quiet(tmp_path, max_steps=1)).fit(Typo(), DataLoader(regression_data(), 4))
    module = Recorder()
    module.trainer = Trainer(**quiet(tmp_path))
    with pytest.raises(MisconfigurationError, match=r"sync_dist_group=\.\.\.\): ddpkit reduces"):
        module.log("x", 1.0, sync_dist_group=object())


@pytest.mark.parametrize("workers", [True, False])
def test_seed_everything_with_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: bool
) -> None:
    """Lightning's signature (``workers=True`` was a TypeError): with it, a loader's workers are
    seeded by Lightning's worker_init_fn — each worker differently, the same every run."""
    for name in ("DDPKIT_SEED", "PL_GLOBAL_SEED", "PL_SEED_WORKERS"):
        monkeypatch.setenv(name, "0")
    assert ddpkit.seed_everything(42, workers=workers, verbose=False) == 42
    assert os.environ["PL_GLOBAL_SEED"] == os.environ["DDPKIT_SEED"] == "42"
    assert os.environ["PL_SEED_WORKERS"] == str(int(workers))

    class Draws(torch.utils.data.Dataset[torch.Tensor]):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, index: int) -> torch.Tensor:
            return torch.rand(1)

    seen: list[list[float]] = []

    class Records(Recorder):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            seen[-1].append(float(batch[0]))
            return self.layer(torch.ones(1, 2)).sum() * 0

    for _ in range(2):
        seen.append([])
        ddpkit.seed_everything(42, workers=workers, verbose=False)
        loader = DataLoader(Draws(), batch_size=1, num_workers=2)
        Trainer(**quiet(tmp_path, max_epochs=1)).fit(Records(), loader)
    assert seen[0] == seen[1]  # reproducible
    assert loader.worker_init_fn is None  # the user's loader is left as it was
    if workers:  # Lightning's function gives the two workers different draws
        assert seen[0][0] != seen[0][1]


def test_seed_everything_refuses_what_numpy_cannot_take(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DDPKIT_SEED", "PL_GLOBAL_SEED", "PL_SEED_WORKERS"):
        monkeypatch.setenv(name, "0")
    with pytest.raises(MisconfigurationError, match=r"seed_everything\(-1\): a seed must lie in"):
        ddpkit.seed_everything(-1)
    monkeypatch.delenv("DDPKIT_SEED")
    monkeypatch.setenv("PL_GLOBAL_SEED", "9")
    assert ddpkit.seed_everything(verbose=False) == 9  # the exported seed, Lightning's variable


def test_a_1x_epoch_end_hook_reads_the_epoch_values(tmp_path: Path) -> None:
    """Lightning 1.x called validation_epoch_end after the epoch closed: callback_metrics held
    the epoch mean (ddpkit gave None), and what the hook logs reaches the callbacks after it."""
    seen: list[float] = []

    class Legacy(Recorder):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_loss", torch.tensor(float(batch_idx)))

        def validation_epoch_end(self, outputs: Any) -> None:
            seen.append(float(self.trainer.callback_metrics["val_loss"]))
            self.log("from_epoch_end", 7.0)

    stopper = ddpkit.callbacks.EarlyStopping("from_epoch_end", patience=5)
    data = DataLoader(regression_data(), 8)  # 4 batches: the mean of 0, 1, 2, 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ddpkit.DDPKitDeprecationWarning)
        Trainer(**quiet(tmp_path, max_epochs=1, num_sanity_val_steps=0),
                callbacks=[stopper]).fit(Legacy(), data, data)  # fmt: skip
    assert seen == [1.5]
    assert float(stopper.best_score) == 7.0


def test_setup_optimizers_in_pre_dispatch_is_honoured(tmp_path: Path) -> None:
    """Lightning 1.4's test_plugin_setup_optimizers_in_pre_dispatch: a training type that asks
    for it gets the optimizers after on_fit_start (ddpkit never read the property)."""
    found: dict[str, int] = {}

    class Watches(Recorder):
        def on_fit_start(self) -> None:
            found["on_fit_start"] = len(self.trainer.optimizers)

        def on_fit_end(self) -> None:
            found["on_fit_end"] = len(self.trainer.optimizers)

    for delay in (True, False):

        class Late(SingleDevicePlugin):
            delayed = delay

            @property
            def setup_optimizers_in_pre_dispatch(self) -> bool:
                return self.delayed

        trainer = Trainer(**quiet(tmp_path, fast_dev_run=True), strategy=Late(device="cpu"))
        trainer.fit(Watches(), DataLoader(regression_data(), 4))
        assert found == {"on_fit_start": 0 if delay else 1, "on_fit_end": 1}, delay


def test_the_plugins_loader_hooks_get_every_loader(tmp_path: Path) -> None:
    """1.x's on_reset_*_dataloader of a training type and an accelerator subclass: called with
    each stage's loader, and what they return is what runs."""
    calls: list[str] = []

    def hook(owner: str, kind: str) -> Any:
        def on_reset(self: Any, loader: Any) -> Any:
            calls.append(f"{owner}.{kind}")
            return DataLoader(loader.dataset, batch_size=2)  # replaces the loader

        return on_reset

    kinds = ("train", "val", "test", "predict")
    Plugin = type("Plugin", (SingleDevicePlugin,),
                  {f"on_reset_{k}_dataloader": hook("plugin", k) for k in kinds})  # fmt: skip
    Device = type("Device", (ddpkit.accelerators.CPUAccelerator,),
                  {f"on_reset_{k}_dataloader": hook("accelerator", k) for k in kinds})  # fmt: skip
    trainer = Trainer(**quiet(tmp_path, max_epochs=1, num_sanity_val_steps=0),
                      strategy=Plugin(device="cpu"), accelerator=Device())  # fmt: skip
    data = DataLoader(regression_data(), 8)
    trainer.fit(Recorder(), data, data)
    assert trainer.num_training_batches == len(regression_data()) // 2  # the hooks' loader ran
    trainer.test(dataloaders=data, verbose=False)
    trainer.predict(dataloaders=data)
    assert calls == [f"{o}.{k}" for k in kinds for o in ("plugin", "accelerator")]


READ_ONLY_FIT = """
    import sys, torch, warnings
    from torch.utils.data import DataLoader, TensorDataset
    import ddpkit
    from ddpkit.callbacks import ModelCheckpoint
    from ddpkit.loggers import CSVLogger

    warnings.simplefilter("ignore")
    steps = []

    class Net(ddpkit.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch, batch_idx):
            steps.append(batch_idx)
            return self.layer(batch[0]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    ro = sys.argv[1]
    for kwargs in ({"callbacks": [ModelCheckpoint(dirpath=ro + "/ckpt")], "logger": False},
                   {"logger": CSVLogger(ro)}):
        trainer = ddpkit.Trainer(default_root_dir=sys.argv[2], max_epochs=1,
                                 enable_progress_bar=False, enable_model_summary=False, **kwargs)
        try:
            trainer.fit(Net(), DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2))
        except ddpkit.MisconfigurationError as err:
            print("REFUSED", steps, err)
        else:
            print("RAN", steps)
"""


@pytest.mark.timeout(120)
def test_a_read_only_folder_is_refused_before_the_first_step(tmp_path: Path) -> None:
    """Before, ModelCheckpoint(dirpath=<read-only>) and a logger there failed after an epoch's
    work. A read-only file system (a tmpfs mounted ro in a mount namespace of its own: root
    ignores permission bits, not that) shows it as any user meets it."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-m", "true"], capture_output=True).returncode:
        pytest.skip("needs unshare -m (a private mount namespace) to mount a read-only folder")
    ro, script = tmp_path / "ro", tmp_path / "fit.py"
    ro.mkdir()
    script.write_text(textwrap.dedent(READ_ONLY_FIT))
    command = (
        f"mount -t tmpfs -o ro,size=1m tmpfs {ro} && exec {sys.executable} {script} {ro} {tmp_path}"
    )
    done = subprocess.run([unshare, "-m", "sh", "-c", command], capture_output=True, text=True,
                          timeout=100)  # fmt: skip
    if "mount:" in done.stderr:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    lines = [line for line in done.stdout.splitlines() if line.startswith(("REFUSED", "RAN"))]
    assert len(lines) == 2, done.stdout + done.stderr
    for line, who in zip(lines, ("ModelCheckpoint(dirpath=", "CSVLogger(save_dir="), strict=True):
        assert line.startswith("REFUSED [] Trainer.fit: " + who), line  # no step ran
        assert "is not writable by this process" in line and "Fix:" in line


def test_resuming_past_max_epochs_is_refused(tmp_path: Path) -> None:
    """Lightning's FitLoop check: fit(ckpt_path=) with max_epochs below the checkpoint's epoch
    raises (ddpkit ran no epoch and reported success)."""
    trainer = Trainer(**quiet(tmp_path, max_epochs=3))
    trainer.fit(Recorder(), DataLoader(regression_data(), 8))
    path = tmp_path / "three.ckpt"
    trainer.save_checkpoint(path)
    again = Trainer(**quiet(tmp_path, max_epochs=1))
    with pytest.raises(MisconfigurationError, match=r"current_epoch=3.*max_epochs=1.*Fix:"):
        again.fit(Recorder(), DataLoader(regression_data(), 8), ckpt_path=str(path))
