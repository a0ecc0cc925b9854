"""A 1.x project's own module, imported by train_1x.py: `python -m ddpkit.lightning` ports its
imports as it loads it (the script's folder is the project)."""

import pytorch_lightning as pl
import torch
from pytorch_lightning.core.lightning import LightningModule  # a 1.0-1.8 path


class Net(LightningModule):
    def __init__(self, backbone: torch.nn.Module, lr: float = 0.1):
        super().__init__()
        self.save_hyperparameters()  # an nn.Module among the hyperparameters, as 1.x allowed
        self.backbone = backbone

    def forward(self, x):
        return self.backbone(x)

    def training_step(self, batch, batch_idx):
        loss = self(batch[0]).pow(2).mean()
        self.log("train_loss", loss)
        return loss

    def training_epoch_end(self, outputs):
        self.log("steps_seen", float(len(outputs)))

    def test_step(self, batch, batch_idx):
        self.log("test_value", self(batch[0]).mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class Data(pl.LightningDataModule):
    def __init__(self, out: str):
        super().__init__()
        self.out = out

    def prepare_data(self):
        # 1.0-1.5 ran this in the launching process before spawning, so every spawned rank saw
        # it; under DDPPlugin each process ran the script, and only local rank 0 prepared
        self.scale = 3.0

    def setup(self, stage=None):
        scale = getattr(self, "scale", 1.0)
        name = "fit" if stage in ("fit", None) else "test"
        with open(f"{self.out}/scale_rank{self.trainer.global_rank}_{name}", "w") as fh:
            fh.write(str(scale))
        g = torch.Generator().manual_seed(0)
        self.data = torch.utils.data.TensorDataset(torch.randn(32, 4, generator=g) * scale)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self.data, batch_size=4)

    def test_dataloader(self):
        return torch.utils.data.DataLoader(self.data, batch_size=8)
