"""Paths that start with ``~``, run by real Lightning 2.x and by ddpkit: the files land where
Lightning's land (Lightning writes, lists and reads through fsspec, which expands ``~``), and the
paths each object reports are Lightning's (a logger's and a derived checkpoint folder keep the
``~``; ``default_root_dir`` and a ModelCheckpoint's own ``dirpath`` are expanded).

Before, ddpkit wrote ``CSVLogger("~/logs")``'s rows, and every checkpoint in a folder derived from
a logger, into a folder literally named ``~`` under the working directory."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
import ddpkit.callbacks
import ddpkit.loggers

pl = pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")


def module(base: type) -> Any:
    class Tiny(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = self.layer(batch[0]).pow(2).mean()
            self.log("loss", loss)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Tiny()


#: Trainer keywords by case, for (the library's Trainer, its loggers, its callbacks)
CASES = {
    "csv": lambda T, loggers, callbacks: {"logger": loggers.CSVLogger("~/csv")},
    "tensorboard": lambda T, loggers, callbacks: {"logger": loggers.TensorBoardLogger("~/tb")},
    "dirpath": lambda T, loggers, callbacks: {
        "callbacks": [callbacks.ModelCheckpoint(dirpath="~/ck")],
        "logger": loggers.CSVLogger("logs"),
    },
    "root": lambda T, loggers, callbacks: {"default_root_dir": "~/root"},
}


def run(library: str, case: str, top: Path) -> dict[str, Any]:
    """One epoch of two steps in ``top/work`` with ``top/home`` as the home folder; what the
    Trainer reports and the files written, with ``top`` written ``<top>``."""
    if library == "lightning":
        Trainer, loggers, callbacks = pl.Trainer, pl.loggers, pl.callbacks
        model = module(pl.LightningModule)
    else:
        Trainer, loggers, callbacks = ddpkit.Trainer, ddpkit.loggers, ddpkit.callbacks
        model = module(ddpkit.Module)
    trainer = Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
        **CASES[case](Trainer, loggers, callbacks),
    )
    data = DataLoader(TensorDataset(torch.randn(4, 2)), batch_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, data)
    best = trainer.checkpoint_callback.best_model_path
    # A path as reported reads back, by the library's own loading.
    reloaded = type(model).load_from_checkpoint(best)
    assert torch.equal(reloaded.layer.weight, model.layer.weight)
    reported = {
        "default_root_dir": trainer.default_root_dir,
        "log_dir": trainer.loggers[0].log_dir,
        "dirpath": trainer.checkpoint_callback.dirpath,
        "best": best,
    }
    written = [p for p in top.rglob("*") if p.is_file() and ".cache" not in p.parts]
    return {
        **{k: str(v).replace(str(top), "<top>") for k, v in reported.items()},
        "files": sorted(str(p.relative_to(top)) for p in written),
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_path_with_a_tilde_lands_where_lightning_writes_it(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = {}
    for library in ("lightning", "ddpkit"):
        top = tmp_path / library
        (top / "home").mkdir(parents=True)
        (top / "work").mkdir()
        monkeypatch.setenv("HOME", str(top / "home"))
        monkeypatch.chdir(top / "work")
        seen[library] = run(library, case, top)
    lightning, ours = seen["lightning"], seen["ddpkit"]
    # No folder named `~`: what a `~` path names is in the home folder.
    assert not any(f.startswith("work/~") for f in ours["files"]), ours["files"]
    assert ours["default_root_dir"] == lightning["default_root_dir"]
    if case == "root":
        # ddpkit's default logger is its CSVLogger in the root itself, not TensorBoard's
        # lightning_logs/version_0 (docs/flags.md, the Differences table): every file lands in
        # the home folder's root all the same.
        assert ours["files"] and all(f.startswith("home/root/") for f in ours["files"])
        return
    for key in ("log_dir", "dirpath", "best"):
        assert ours[key] == lightning[key], key
    # the checkpoint and (CSV) the metrics, at Lightning's place
    kept = (".ckpt", "metrics.csv")
    assert [f for f in ours["files"] if f.endswith(kept)] == [
        f for f in lightning["files"] if f.endswith(kept)
    ]
