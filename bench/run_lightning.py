"""Lightning 2.x (``pytorch-lightning``): the same workload through ``pl.Trainer.fit``.

    python -m bench.run_lightning --workload mlp --mode single   # devices=1
    python -m bench.run_lightning --workload mlp --mode ddp      # strategy="ddp"
    python -m bench.run_lightning --workload mlp --mode spawn    # strategy="ddp_spawn"

``--features off`` (the default) turns the progress bar, the logger, checkpointing and the model
summary off; ``--features on`` leaves them at Lightning's defaults; ``--features callbacks`` is
"off" plus Lightning's ModelCheckpoint and EarlyStopping and the same custom callback as
ddpkit's runner.
"""

from __future__ import annotations

import time

_t = time.perf_counter()

import os  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from typing import Any  # noqa: E402

import pytorch_lightning as pl  # noqa: E402
import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from bench.workload import (  # noqa: E402
    SEED,
    TimedSGD,
    Workload,
    counting_callback,
    make_loader,
    make_net,
    parse_args,
    write_result,
)

IMPORT_S = time.perf_counter() - _t
WORLD_SIZE = 2

# "does not have many workers", "GPU available but not used" and the like: noise here.
warnings.filterwarnings("ignore", module="pytorch_lightning")
warnings.filterwarnings("ignore", module="lightning_fabric")


class BenchModule(pl.LightningModule):
    def __init__(self, w: Workload, mode: str, features: str) -> None:
        super().__init__()
        self.w, self.mode, self.features = w, mode, features
        self.net = make_net(w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> TimedSGD:
        self.opt = TimedSGD(self.parameters())
        return self.opt

    def on_fit_end(self) -> None:
        if self.trainer.global_rank == 0:
            write_result(
                contender="lightning",
                w=self.w,
                mode=self.mode,
                features=self.features,
                world_size=self.trainer.world_size,
                steps=self.w.steps,
                optimizer=self.opt,
                final_loss=float(self.trainer.callback_metrics["loss"]),
                import_s=IMPORT_S,
            )


def main() -> None:
    args = parse_args()
    w: Workload = args.w
    flags: dict[str, Any] = {
        "single": {"accelerator": "gpu" if args.device == "cuda" else "cpu", "devices": 1},
        "ddp": {"accelerator": "cpu", "devices": WORLD_SIZE, "strategy": "ddp"},
        "spawn": {"accelerator": "cpu", "devices": WORLD_SIZE, "strategy": "ddp_spawn"},
    }[args.mode]
    on = args.features == "on"
    with_callbacks = args.features == "callbacks"
    root = args.root or os.path.join(tempfile.gettempdir(), "lightning-bench")
    callbacks: list[Any] = []
    if with_callbacks:
        callbacks = [
            pl.callbacks.ModelCheckpoint(monitor="loss"),
            pl.callbacks.EarlyStopping("loss", patience=1000),
            counting_callback(pl.Callback)(),
        ]
    trainer = pl.Trainer(
        **flags,
        max_epochs=1,
        max_steps=w.steps,
        num_sanity_val_steps=0,
        enable_progress_bar=on,
        logger=on,
        enable_checkpointing=on or with_callbacks,
        enable_model_summary=on,
        callbacks=callbacks,
        default_root_dir=root,
    )
    torch.manual_seed(SEED)
    model = BenchModule(w, args.mode, args.features)
    world = 1 if args.mode == "single" else WORLD_SIZE
    trainer.fit(model, make_loader(w, world, w.steps))


if __name__ == "__main__":
    main()
