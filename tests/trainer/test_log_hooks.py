"""``self.log`` where Lightning refuses it is refused by ddpkit too, and allowed where Lightning
allows it: the same module, logging in one hook, run by real Lightning 2.x and by ddpkit."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit.errors import MisconfigurationError
from ddpkit.trainer._log_hooks import options_of

pl = pytest.importorskip("pytorch_lightning", reason="no `lightning` extra")

#: hook → the stage that runs it; where Lightning refuses self.log, and where it allows it
HOOKS = {
    "setup": "fit",
    "configure_optimizers": "fit",
    "on_fit_start": "fit",
    "on_train_start": "fit",
    "on_train_epoch_start": "fit",
    "on_train_end": "fit",
    "on_fit_end": "fit",
    "on_validation_start": "fit",
    "on_validation_end": "fit",
    "predict_step": "predict",
    "on_predict_epoch_end": "predict",
}


def module(base: type, hook: str, keywords: dict[str, Any]) -> Any:
    def log_here(self: Any) -> None:
        self.log("x", 1.0, **keywords)

    class Logging(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return F.mse_loss(self.layer(batch[0]), batch[1])

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("v", F.mse_loss(self.layer(batch[0]), batch[1]))

        def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            if hook == "predict_step":
                log_here(self)
            return self.layer(batch[0])

        def configure_optimizers(self) -> Any:
            if hook == "configure_optimizers":
                log_here(self)
            return torch.optim.SGD(self.parameters(), lr=0.1)

    if hook not in ("predict_step", "configure_optimizers"):
        setattr(Logging, hook, lambda self, *args, **kwargs: log_here(self))
    return Logging()


def refused(kind: str, hook: str, tmp_path: Path, **keywords: Any) -> bool:
    lib: Any = pl if kind == "lightning" else ddpkit
    base = pl.LightningModule if kind == "lightning" else ddpkit.Module
    x = torch.randn(8, 2, generator=torch.Generator().manual_seed(0))
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    trainer = lib.Trainer(
        accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path / kind,
    )  # fmt: skip
    model = module(base, hook, keywords)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about workers
        try:
            if HOOKS[hook] == "predict":
                trainer.predict(model, data)
            else:
                trainer.fit(model, data, data)
        except (pl.utilities.exceptions.MisconfigurationException, MisconfigurationError):
            return True
    return False


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_self_log_is_refused_where_lightning_refuses_it(hook: str, tmp_path: Path) -> None:
    expected = refused("lightning", hook, tmp_path)
    assert refused("ddpkit", hook, tmp_path) is expected
    assert _refused_by_table(hook) is expected  # ddpkit's table says what Lightning does


@pytest.mark.parametrize(
    ("hook", "keywords"),
    [("on_train_epoch_start", {"on_step": True}), ("on_validation_start", {"on_epoch": False})],
)
def test_a_level_a_hook_does_not_have_is_refused(
    hook: str, keywords: dict[str, Any], tmp_path: Path
) -> None:
    assert refused("lightning", hook, tmp_path, **keywords)
    assert refused("ddpkit", hook, tmp_path, **keywords)
    assert not refused("ddpkit", hook, tmp_path)


def _refused_by_table(hook: str) -> bool:
    try:
        options_of(hook)
    except MisconfigurationError:
        return True
    return False
