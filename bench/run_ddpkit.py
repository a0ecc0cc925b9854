"""ddpkit: the same workload through ``Trainer.fit``.

    python -m bench.run_ddpkit --workload mlp --mode single   # Trainer(devices=1)
    python -m bench.run_ddpkit --workload mlp --mode ddp      # DDPPlugin: subprocess ranks
    python -m bench.run_ddpkit --workload mlp --mode spawn    # DDPSpawnPlugin: spawned ranks
    python -m bench.run_ddpkit --workload mlp --mode forkserver  # DDPSpawnPlugin(start_method=...)

``--features off`` (the default) turns the progress bar, the logger and checkpointing off, as the
Lightning runner does; ``--features on`` leaves them at their defaults; ``--features callbacks``
is "off" plus ``ModelCheckpoint(monitor="loss")``, ``EarlyStopping("loss")`` and a custom callback
with per-step hooks (``bench.workload.counting_callback``).
"""

from __future__ import annotations

import time

_t = time.perf_counter()

import os  # noqa: E402
import tempfile  # noqa: E402
from typing import Any  # noqa: E402

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

# Timed: what a training script imports (`import ddpkit` alone imports no torch, PEP 562).
from ddpkit import DDPSpawnPlugin, Module, Trainer  # noqa: E402

IMPORT_S = time.perf_counter() - _t
WORLD_SIZE = 2


class BenchModule(Module):
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
        if self.global_rank == 0:
            write_result(
                contender="ddpkit",
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
        "forkserver": {
            "accelerator": "cpu",
            "devices": WORLD_SIZE,
            "strategy": DDPSpawnPlugin(start_method="forkserver"),
        },
    }[args.mode]
    on = args.features == "on"
    with_callbacks = args.features == "callbacks"
    root = args.root or os.path.join(tempfile.gettempdir(), "ddpkit-bench")
    callbacks: list[Any] = []
    if with_callbacks:
        from ddpkit.callbacks import Callback, EarlyStopping, ModelCheckpoint

        callbacks = [
            ModelCheckpoint(monitor="loss"),
            EarlyStopping("loss", patience=1000),
            counting_callback(Callback)(),
        ]
    trainer = Trainer(
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
