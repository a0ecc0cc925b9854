"""Callbacks that carry Lightning 1.x Trainer keywords into Lightning 2.x's loop."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.utilities import grad_norm

from ddpkit.lightning._shims import defined


class GradNormLogger(pl.Callback):
    """``Trainer(track_grad_norm=p)`` of Lightning 1.x: before each optimizer step (after the
    gradients are unscaled), log the p-norm of each parameter's gradient and of all of them as
    ``grad_{p}_norm/<parameter>`` and ``grad_{p}_norm_total``, per step and per epoch, under the
    names 1.x used (or hand them to the module's 1.x ``log_grad_norm``). Lightning 2.x's
    replacement is the same call in the module's own ``on_before_optimizer_step``."""

    def __init__(self, norm_type: float) -> None:
        self.norm_type = float(norm_type)

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Any
    ) -> None:
        norms = grad_norm(pl_module, norm_type=self.norm_type)
        if not norms:
            return
        module: Any = pl_module
        if defined(module, "log_grad_norm", pl.LightningModule) is not None:
            module.log_grad_norm(norms)  # 1.4–1.9's hook: the module logs them itself
        else:
            pl_module.log_dict(norms, on_step=True, on_epoch=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(norm_type={self.norm_type:g})"
