"""A Lightning 1.x training script whose 1.x features are chosen on its command line, so that one
script spans the twin tests' grid: the step outputs the ``*_epoch_end`` hooks get, one optimizer
(schedulers, a warm-up ``optimizer_step`` override) or a GAN's two with ``optimizer_idx``
(``"frequency"``, schedulers, an ``optimizer_step`` override), ``self.log``'s flags, the
callbacks, a plain or an ``nn.Module`` hyperparameter, loaders or a ``LightningDataModule``, and
every Trainer keyword through 1.x's argparse API.

It is 1.x code as a 1.x user wrote it (``import pytorch_lightning``); run it on Lightning 1.9.5
(``python train_1x.py ...``) or on ddpkit (``python -m ddpkit.lightning train_1x.py ...``). It
ends by writing what it did (``effects_1x.write_effects``) to ``--effects``.
"""

import os
from argparse import ArgumentParser
from typing import Any

import torch
from effects_1x import HookRecorder, RecordingModule, record, weights, write_effects
from pytorch_lightning import Callback, LightningDataModule, Trainer, seed_everything
from pytorch_lightning.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

OPTIMS = ["sgd", "sched_step", "sched_epoch", "warmup"]
GAN_OPTIMS = ["gan", "gan_freq", "gan_sched", "gan_freq_sched", "gan_step"]
EPOCH_ENDS = ["none", "tensor", "dict", "none_step"]
LOGGING = ["default", "epoch", "step_epoch", "sync"]


def dataset(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 1).long())


class TwinData(LightningDataModule):
    """A 1.x DataModule: ``prepare_data``, ``setup(stage)`` and the argparse class methods."""

    def __init__(self, batch_size: int = 4, num_samples: int = 32) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.num_samples = num_samples
        self.record_folder: str | None = None

    def _record(self, hook: str, **arguments: Any) -> None:
        if self.record_folder:
            rank = self.trainer.global_rank if self.trainer is not None else 0
            record(self.record_folder, rank, "datamodule", hook, **arguments)

    def prepare_data(self) -> None:
        self._record("prepare_data")

    def setup(self, stage: str | None = None) -> None:
        self._record("setup", stage=stage)
        self.train = dataset(self.num_samples, 0)
        self.val = dataset(self.num_samples // 2, 1)
        self.test = dataset(self.num_samples // 2, 2)

    def teardown(self, stage: str | None = None) -> None:
        self._record("teardown", stage=stage)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=self.batch_size)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val, batch_size=self.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test, batch_size=self.batch_size)

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(self.test, batch_size=self.batch_size)


class Classifier(RecordingModule):
    def __init__(
        self,
        lr: float = 0.1,
        optim: str = "sgd",
        epoch_end: str = "none",
        logging: str = "default",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = head if head is not None else nn.Linear(4, 3)

    def _log_step(self, stage: str, loss: torch.Tensor, batch_idx: int) -> None:
        mode = self.hparams.logging
        if stage == "train":
            if mode == "default":
                self.log("train_loss", loss)
            elif mode == "epoch":
                self.log("train_loss", loss, on_step=False, on_epoch=True, prog_bar=True)
            elif mode == "step_epoch":
                self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True)
            else:
                self.log("train_loss", loss, on_step=True, on_epoch=True, sync_dist=True)
                self.log_dict({"batch_idx": float(batch_idx)}, on_step=True, on_epoch=False)
            return
        self.log(f"{stage}_loss", loss, on_epoch=True, sync_dist=mode == "sync")
        if mode == "step_epoch":
            self.log(f"{stage}_step_too", loss, on_step=True, on_epoch=True, prog_bar=True)
        elif mode == "epoch":
            self.log(f"{stage}_bar", loss, prog_bar=True)

    def _output(self, loss: torch.Tensor, logits: torch.Tensor, batch_idx: int, key: str) -> Any:
        mode = self.hparams.epoch_end
        if mode == "none_step" and batch_idx == 1:
            return None
        if mode == "dict":
            return {key: loss, "preds": logits.detach().argmax(1)}
        return loss

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.layer(x)
        loss = F.cross_entropy(logits, y)
        self._log_step("train", loss, batch_idx)
        return self._output(loss, logits, batch_idx, "loss")

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.layer(x)
        loss = F.cross_entropy(logits, y)
        self._log_step("val", loss, batch_idx)
        return self._output(loss, logits, batch_idx, "val_loss")

    def test_step(self, batch, batch_idx):
        x, y = batch
        logits = self.layer(x)
        loss = F.cross_entropy(logits, y)
        self._log_step("test", loss, batch_idx)
        return self._output(loss, logits, batch_idx, "test_loss")

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        return self.layer(batch[0]).argmax(1)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        if self.hparams.optim == "sched_step":
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
            return [optimizer], [{"scheduler": scheduler, "interval": "step"}]
        if self.hparams.optim == "sched_epoch":
            return [optimizer], [torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.5)]
        return optimizer


class WarmUp(Classifier):
    """The learning-rate warm-up of 1.x's docs: ``optimizer_step`` with 1.x's arguments."""

    def optimizer_step(
        self,
        epoch,
        batch_idx,
        optimizer,
        optimizer_idx,
        optimizer_closure,
        on_tpu=False,
        using_native_amp=False,
        using_lbfgs=False,
    ):
        if self.trainer.global_step < 6:
            scale = min(1.0, float(self.trainer.global_step + 1) / 6.0)
            for group in optimizer.param_groups:
                group["lr"] = scale * self.hparams.lr
        self._record("optimizer_step", epoch=epoch, batch_idx=batch_idx, idx=optimizer_idx)
        optimizer.step(closure=optimizer_closure)


class GAN(RecordingModule):
    """Two optimizers under 1.x's automatic optimization: ``training_step(..., optimizer_idx)``."""

    def __init__(
        self,
        lr: float = 0.1,
        optim: str = "gan",
        epoch_end: str = "none",
        logging: str = "default",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.generator = nn.Linear(2, 4)
        self.layer = head if head is not None else nn.Linear(4, 3)
        self.judge = nn.Linear(3, 1)

    def discriminate(self, x: torch.Tensor) -> torch.Tensor:
        return self.judge(torch.tanh(self.layer(x)))

    def training_step(self, batch, batch_idx, optimizer_idx):
        x, _ = batch
        z = torch.sin(x[:, :2] * (batch_idx + 1))
        fake = self.generator(z)
        if optimizer_idx == 0:
            loss = ((self.discriminate(fake) - 1) ** 2).mean()
            self.log("g_loss", loss, on_step=True, on_epoch=self.hparams.logging != "default")
        else:
            real = ((self.discriminate(x) - 1) ** 2).mean()
            loss = real + (self.discriminate(fake.detach()) ** 2).mean()
            self.log("d_loss", loss, prog_bar=self.hparams.logging == "epoch")
        mode = self.hparams.epoch_end
        if mode == "none_step" and batch_idx == 1 and optimizer_idx == 1:
            return None
        if mode == "dict":
            return {"loss": loss, "idx": optimizer_idx}
        return loss

    def validation_step(self, batch, batch_idx):
        x, _ = batch
        loss = ((self.discriminate(x) - 1) ** 2).mean()
        self.log("val_loss", loss, sync_dist=self.hparams.logging == "sync")
        return None if self.hparams.epoch_end == "none_step" else loss

    def test_step(self, batch, batch_idx):
        x, _ = batch
        loss = ((self.discriminate(x) - 1) ** 2).mean()
        self.log("test_loss", loss)
        return {"test_loss": loss} if self.hparams.epoch_end == "dict" else loss

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        return self.discriminate(batch[0])

    def configure_optimizers(self):
        d_params = [*self.layer.parameters(), *self.judge.parameters()]
        opt_g = torch.optim.SGD(self.generator.parameters(), lr=self.hparams.lr)
        opt_d = torch.optim.SGD(d_params, lr=self.hparams.lr / 2)
        optim = self.hparams.optim
        if optim == "gan_freq":
            return (
                {"optimizer": opt_g, "frequency": 1},
                {"optimizer": opt_d, "frequency": 2},
            )
        step_g = torch.optim.lr_scheduler.StepLR(opt_g, step_size=2, gamma=0.5)
        step_d = torch.optim.lr_scheduler.ExponentialLR(opt_d, gamma=0.7)
        if optim == "gan_sched":
            return [opt_g, opt_d], [
                {"scheduler": step_g, "interval": "step"},
                {"scheduler": step_d, "interval": "epoch"},
            ]
        if optim == "gan_freq_sched":
            return (
                {"optimizer": opt_g, "frequency": 2,
                 "lr_scheduler": {"scheduler": step_g, "interval": "step"}},
                {"optimizer": opt_d, "frequency": 1, "lr_scheduler": step_d},
            )  # fmt: skip
        return [opt_g, opt_d]


class GANStep(GAN):
    """1.x's docs: the discriminator steps every second batch, from ``optimizer_step``."""

    def optimizer_step(
        self,
        epoch,
        batch_idx,
        optimizer,
        optimizer_idx,
        optimizer_closure,
        on_tpu=False,
        using_native_amp=False,
        using_lbfgs=False,
    ):
        self._record("optimizer_step", epoch=epoch, batch_idx=batch_idx, idx=optimizer_idx)
        if optimizer_idx == 0 or (batch_idx + 1) % 2 == 0:
            optimizer.step(closure=optimizer_closure)
        else:
            optimizer_closure()


class EpochEnds:
    """The 1.x ``*_epoch_end(outputs)`` hooks."""

    def _summarise(self, stage: str, outputs: Any) -> None:
        self._record(f"{stage}_epoch_end", outputs=outputs)
        flat = outputs
        while flat and isinstance(flat[0], list):
            flat = [item for group in flat for item in group]
        losses = [o if isinstance(o, torch.Tensor) else next(iter(o.values())) for o in flat]
        losses = [loss.float() for loss in losses if isinstance(loss, torch.Tensor)]
        if losses:
            self.log(f"{stage}_epoch_mean", torch.stack(losses).mean())

    def training_epoch_end(self, outputs):
        self._summarise("training", outputs)

    def validation_epoch_end(self, outputs):
        self._summarise("validation", outputs)

    def test_epoch_end(self, outputs):
        self._summarise("test", outputs)


class ClassifierWithEpochEnds(EpochEnds, Classifier):
    pass


class WarmUpWithEpochEnds(EpochEnds, WarmUp):
    pass


class GANWithEpochEnds(EpochEnds, GAN):
    pass


class GANStepWithEpochEnds(EpochEnds, GANStep):
    pass


def module_class(optim: str, epoch_end: str) -> type:
    base = {"warmup": WarmUp, "gan_step": GANStep}.get(optim)
    if base is None:
        base = GAN if optim in GAN_OPTIMS else Classifier
    if epoch_end == "none":
        return base
    return globals()[f"{base.__name__}WithEpochEnds"]


class Signatures19(Callback):
    """The evaluation batch hooks as 1.9's ``Callback`` declares them: ``dataloader_idx``
    required."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx):
        record(self.folder, trainer.global_rank, "sig19", "on_validation_batch_start",
               dataloader_idx=dataloader_idx)  # fmt: skip

    def on_validation_batch_end(
        self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx
    ):
        record(self.folder, trainer.global_rank, "sig19", "on_validation_batch_end",
               dataloader_idx=dataloader_idx)  # fmt: skip

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx):
        record(self.folder, trainer.global_rank, "sig19", "on_test_batch_start",
               dataloader_idx=dataloader_idx)  # fmt: skip

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx):
        record(self.folder, trainer.global_rank, "sig19", "on_test_batch_end",
               dataloader_idx=dataloader_idx)  # fmt: skip


def callbacks(names: list[str], folder: str) -> list:
    made: list = [HookRecorder(folder)]
    if "ckpt" in names:
        made.append(
            ModelCheckpoint(
                dirpath=os.path.join(folder, "ckpt"), monitor="val_loss", save_top_k=2,
                save_last=True,
            )
        )  # fmt: skip
    if "es" in names:
        made.append(EarlyStopping(monitor="val_loss", mode="max", patience=1))
    if "lrmon" in names:
        made.append(LearningRateMonitor())
    if "sig19" in names:
        made.append(Signatures19(folder))
    return made


def main() -> None:
    parser = ArgumentParser()
    parser.add_argument("--effects", required=True)
    parser.add_argument("--optim", choices=OPTIMS + GAN_OPTIMS, default="sgd")
    parser.add_argument("--epoch_end", choices=EPOCH_ENDS, default="none")
    parser.add_argument("--logging", choices=LOGGING, default="default")
    parser.add_argument("--callbacks", default="", help="comma-separated: ckpt, es, lrmon, sig19")
    parser.add_argument("--hparams", choices=["plain", "module"], default="plain")
    parser.add_argument("--data", choices=["loaders", "datamodule"], default="loaders")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--deterministic_run", action="store_true", help="deterministic=True")
    parser = TwinData.add_argparse_args(parser)
    parser = Trainer.add_argparse_args(parser)
    args = parser.parse_args()

    seed_everything(args.seed, workers=True)
    folder = os.path.dirname(os.path.abspath(args.effects))
    names = [n for n in args.callbacks.split(",") if n]
    head = None
    if args.hparams == "module":
        # torch >= 2.6 loads checkpoints with weights_only=True: the module in the
        # hyperparameters must be allowed, on 1.9.5 as on any Lightning
        torch.serialization.add_safe_globals([nn.Linear])
        head = nn.Linear(4, 3)
    cls = module_class(args.optim, args.epoch_end)
    model = cls(
        lr=args.lr, optim=args.optim, epoch_end=args.epoch_end, logging=args.logging, head=head
    )
    model.record_folder = folder
    trainer = Trainer.from_argparse_args(
        args,
        callbacks=callbacks(names, folder),
        logger=CSVLogger(folder, name="csv"),
        enable_progress_bar=False,
        **({"deterministic": True} if args.deterministic_run else {}),
    )
    if args.data == "datamodule":
        data = TwinData.from_argparse_args(args)
        data.record_folder = folder
        trainer.fit(model, datamodule=data)
        loaders: dict[str, Any] = {"datamodule": data}
        predict: dict[str, Any] = {"datamodule": data}
    else:
        train = DataLoader(dataset(args.num_samples, 0), batch_size=args.batch_size)
        val = DataLoader(dataset(args.num_samples // 2, 1), batch_size=args.batch_size)
        trainer.fit(model, train, val)
        test = DataLoader(dataset(args.num_samples // 2, 2), batch_size=args.batch_size)
        loaders = {"dataloaders": test}
        predict = {"dataloaders": DataLoader(dataset(args.num_samples // 2, 2), batch_size=4)}

    checkpoint = trainer.checkpoint_callback
    extra: dict[str, Any] = {
        "namespace": vars(args), "metrics_after_fit": dict(trainer.callback_metrics),
    }  # fmt: skip
    if checkpoint is not None and checkpoint.best_model_path:
        extra["best_model"] = os.path.relpath(checkpoint.best_model_path, folder)
        extra["best_model_score"] = checkpoint.best_model_score
        extra["last_model"] = os.path.relpath(checkpoint.last_model_path or folder, folder)
        loaded = cls.load_from_checkpoint(checkpoint.best_model_path)
        extra["loaded_weights"] = weights(loaded)
        extra["loaded_hparams"] = dict(loaded.hparams)
    best = "best" if "ckpt" in names else None
    extra["test"] = trainer.test(model, ckpt_path=best, **loaders)
    extra["metrics_after_test"] = dict(trainer.callback_metrics)
    extra["predictions"] = trainer.predict(model, **predict)
    for callback in trainer.callbacks:
        if isinstance(callback, EarlyStopping):
            extra["early_stopping"] = {
                "stopped_epoch": callback.stopped_epoch, "wait_count": callback.wait_count,
            }  # fmt: skip
    write_effects(args.effects, trainer, model, **extra)


if __name__ == "__main__":
    main()
