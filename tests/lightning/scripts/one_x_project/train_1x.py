"""A Lightning 1.x script, as a 1.x user wrote it (pytorch_lightning imports, the argparse API,
1.x's device flags), run unchanged by `python -m ddpkit.lightning train_1x.py --out DIR ...`
(tests/lightning/test_runner_1x.py)."""

import json
import os
from argparse import ArgumentParser

import pytorch_lightning as pl
import torch
from model_1x import Data, Net
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.plugins import DDPPlugin


def main():
    parser = ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--ddp_plugin", action="store_true")
    parser = pl.Trainer.add_argparse_args(parser)
    args = parser.parse_args()
    pl.seed_everything(7)
    plugins = [DDPPlugin(find_unused_parameters=False)] if args.ddp_plugin else None
    trainer = pl.Trainer.from_argparse_args(
        args,
        plugins=plugins,
        default_root_dir=args.out,
        callbacks=[ModelCheckpoint(monitor="train_loss")],
        progress_bar_refresh_rate=0,
        weights_summary=None,
    )
    model, data = Net(torch.nn.Linear(4, 1)), Data(args.out)
    trainer.fit(model, datamodule=data)
    steps_seen = float(trainer.callback_metrics["steps_seen"])
    tested = trainer.test(ckpt_path="best", datamodule=data)
    best = trainer.checkpoint_callback.best_model_path
    loaded = model.load_from_checkpoint(best)  # 1.x: on an instance too
    if trainer.global_rank == 0:
        result = {
            "world_size": trainer.world_size,
            "global_step": trainer.global_step,
            "best": os.path.basename(best),
            "tested": tested[0]["test_value"],
            "loaded": type(loaded).__name__,
            "backbone": type(loaded.hparams.backbone).__name__,
            "scripted": type(loaded.to_torchscript()).__name__,
            "steps_seen": steps_seen,
            "lightning": pl.__version__,
        }
        with open(os.path.join(args.out, "result.json"), "w") as fh:
            json.dump(result, fh)


if __name__ == "__main__":
    main()
