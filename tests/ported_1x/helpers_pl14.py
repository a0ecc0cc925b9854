"""The helpers of Lightning 1.4.9's test suite that the ported tests here use, in one module,
adapted to ``ddpkit.Module`` / ``ddpkit.Trainer``.

Ported from Lightning 1.4.9 ``tests/helpers/boring_model.py``, ``tests/helpers/datamodules.py``
(``ClassifDataModule``), ``tests/helpers/datasets.py`` (``SklearnDataset``),
``tests/helpers/simple_models.py`` (``ClassificationModel``), ``tests/helpers/utils.py``
(``reset_seed``, ``no_warning_call``) and ``tests/helpers/runif.py`` (``RunIf``, reduced)
(Apache-2.0, Copyright The PyTorch Lightning team; see NOTICE.md). Changes:

- ``LightningModule`` -> ``ddpkit.Module``, ``LightningDataModule`` -> ``ddpkit.DataModule`` (the
  porting rule of NOTICE.md); the hooks and their bodies are 1.4's (``training_step_end``,
  ``training_epoch_end`` ... included: ddpkit runs 1.x's epoch ends, with a deprecation);
- ``ClassifDataModule`` builds its data with scikit-learn's ``make_classification`` as 1.4 did when
  scikit-learn is installed; without it with a torch stand-in of the same shape (800 rows, 32
  features, 3 classes, one Gaussian cluster per class, seed 42) and the same 0.2 / 0.4 splits;
- ``ClassificationModel``'s ``Accuracy`` (1.4: ``pytorch_lightning.metrics.Accuracy``) is a
  stand-in that returns the batch's accuracy, what 1.4's metric's ``forward`` returned, so that
  these tests need neither Lightning nor torchmetrics;
- ``no_warning_call`` uses ``warnings.catch_warnings(record=True)`` (pytest 8 removed 1.4's
  ``pytest.warns(None)``);
- ``RunIf`` keeps only what these tests use: GPU / TPU / ... conditions skip here, naming the
  condition; ``skip_windows`` and ``min_torch`` are as 1.4's.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from contextlib import contextmanager
from typing import Any, Optional

import pytest
import torch
from packaging.version import Version
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset

from ddpkit import DataModule as LightningDataModule
from ddpkit import Module as LightningModule
from ddpkit import seed_everything

# --------------------------------------------------------------------------------------------
# tests/helpers/boring_model.py
# --------------------------------------------------------------------------------------------


class RandomDictDataset(Dataset):
    def __init__(self, size, length):
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index):
        a = self.data[index]
        b = a + 2
        return {"a": a, "b": b}

    def __len__(self):
        return self.len


class RandomDataset(Dataset):
    def __init__(self, size, length):
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index):
        return self.data[index]

    def __len__(self):
        return self.len


class RandomIterableDataset(IterableDataset):
    def __init__(self, size: int, count: int):
        self.count = count
        self.size = size

    def __iter__(self):
        for _ in range(self.count):
            yield torch.randn(self.size)


class RandomIterableDatasetWithLen(IterableDataset):
    def __init__(self, size: int, count: int):
        self.count = count
        self.size = size

    def __iter__(self):
        for _ in range(len(self)):
            yield torch.randn(self.size)

    def __len__(self):
        return self.count


class BoringModel(LightningModule):
    def __init__(self):
        """
        Testing PL Module

        Use as follows:
        - subclass
        - modify the behavior for what you want

        class TestModel(BaseTestModel):
            def training_step(...):
                # do your own thing

        or:

        model = BaseTestModel()
        model.training_epoch_end = None

        """
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)

    def forward(self, x):
        return self.layer(x)

    def loss(self, batch, prediction):
        # An arbitrary loss to have a loss that updates the model weights during `Trainer.fit` calls
        return torch.nn.functional.mse_loss(prediction, torch.ones_like(prediction))

    def step(self, x):
        x = self(x)
        out = torch.nn.functional.mse_loss(x, torch.ones_like(x))
        return out

    def training_step(self, batch, batch_idx):
        output = self(batch)
        loss = self.loss(batch, output)
        return {"loss": loss}

    def training_step_end(self, training_step_outputs):
        return training_step_outputs

    def training_epoch_end(self, outputs) -> None:
        torch.stack([x["loss"] for x in outputs]).mean()

    def validation_step(self, batch, batch_idx):
        output = self(batch)
        loss = self.loss(batch, output)
        return {"x": loss}

    def validation_epoch_end(self, outputs) -> None:
        torch.stack([x["x"] for x in outputs]).mean()

    def test_step(self, batch, batch_idx):
        output = self(batch)
        loss = self.loss(batch, output)
        return {"y": loss}

    def test_epoch_end(self, outputs) -> None:
        torch.stack([x["y"] for x in outputs]).mean()

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.layer.parameters(), lr=0.1)
        lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
        return [optimizer], [lr_scheduler]

    def train_dataloader(self):
        return DataLoader(RandomDataset(32, 64))

    def val_dataloader(self):
        return DataLoader(RandomDataset(32, 64))

    def test_dataloader(self):
        return DataLoader(RandomDataset(32, 64))

    def predict_dataloader(self):
        return DataLoader(RandomDataset(32, 64))


class BoringDataModule(LightningDataModule):
    def __init__(self, data_dir: str = "./"):
        super().__init__()
        self.data_dir = data_dir
        self.non_picklable = None
        self.checkpoint_state: Optional[str] = None

    def prepare_data(self):
        self.random_full = RandomDataset(32, 64 * 4)

    def setup(self, stage: Optional[str] = None):
        if stage == "fit" or stage is None:
            self.random_train = Subset(self.random_full, indices=range(64))
            self.dims = self.random_train[0].shape

        if stage in ("fit", "validate") or stage is None:
            self.random_val = Subset(self.random_full, indices=range(64, 64 * 2))

        if stage == "test" or stage is None:
            self.random_test = Subset(self.random_full, indices=range(64 * 2, 64 * 3))
            self.dims = getattr(self, "dims", self.random_test[0].shape)

        if stage == "predict" or stage is None:
            self.random_predict = Subset(self.random_full, indices=range(64 * 3, 64 * 4))
            self.dims = getattr(self, "dims", self.random_predict[0].shape)

    def train_dataloader(self):
        return DataLoader(self.random_train)

    def val_dataloader(self):
        return DataLoader(self.random_val)

    def test_dataloader(self):
        return DataLoader(self.random_test)

    def predict_dataloader(self):
        return DataLoader(self.random_predict)


# --------------------------------------------------------------------------------------------
# tests/helpers/datasets.py, tests/helpers/datamodules.py (ClassifDataModule)
# --------------------------------------------------------------------------------------------


class SklearnDataset(Dataset):
    def __init__(self, x, y, x_type, y_type):
        self.x = x
        self.y = y
        self._x_type = x_type
        self._y_type = y_type

    def __getitem__(self, idx):
        return torch.tensor(self.x[idx], dtype=self._x_type), torch.tensor(self.y[idx], dtype=self._y_type)

    def __len__(self):
        return len(self.y)


def _make_classification(n_samples, n_features, n_classes, random_state):
    """scikit-learn's ``make_classification(..., n_clusters_per_class=1)`` where it is installed;
    else a torch stand-in: one Gaussian cluster per class, on the vertices of a hypercube."""
    try:
        from sklearn.datasets import make_classification
    except ImportError:
        g = torch.Generator().manual_seed(random_state)
        centers = (torch.randint(0, 2, (n_classes, n_features), generator=g) * 2 - 1).float()
        y = torch.arange(n_samples) % n_classes
        y = y[torch.randperm(n_samples, generator=g)]
        x = centers[y] + torch.randn(n_samples, n_features, generator=g)
        return x.numpy(), y.numpy()
    return make_classification(
        n_samples=n_samples,
        n_features=n_features,
        n_classes=n_classes,
        n_clusters_per_class=1,
        random_state=random_state,
    )


def _train_test_split(x, y, test_size, random_state):
    try:
        from sklearn.model_selection import train_test_split
    except ImportError:
        n = len(y)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(random_state)).numpy()
        n_test = int(round(n * test_size))
        test, train = order[:n_test], order[n_test:]
        return x[train], x[test], y[train], y[test]
    return train_test_split(x, y, test_size=test_size, random_state=random_state)


class SklearnDataModule(LightningDataModule):
    def __init__(self, sklearn_dataset, x_type, y_type, batch_size: int = 10):
        super().__init__()
        self.batch_size = batch_size
        self._x, self._y = sklearn_dataset
        self._split_data()
        self._x_type = x_type
        self._y_type = y_type

    def _split_data(self):
        self.x_train, self.x_test, self.y_train, self.y_test = _train_test_split(
            self._x, self._y, test_size=0.20, random_state=42
        )
        self.x_train, self.x_valid, self.y_train, self.y_valid = _train_test_split(
            self.x_train, self.y_train, test_size=0.40, random_state=42
        )

    def train_dataloader(self):
        return DataLoader(
            SklearnDataset(self.x_train, self.y_train, self._x_type, self._y_type), batch_size=self.batch_size
        )

    def val_dataloader(self):
        return DataLoader(
            SklearnDataset(self.x_valid, self.y_valid, self._x_type, self._y_type), batch_size=self.batch_size
        )

    def test_dataloader(self):
        return DataLoader(
            SklearnDataset(self.x_test, self.y_test, self._x_type, self._y_type), batch_size=self.batch_size
        )

    @property
    def sample(self):
        return torch.tensor([self._x[0]], dtype=self._x_type)


class ClassifDataModule(SklearnDataModule):
    def __init__(self, num_features=32, length=800, num_classes=3, batch_size=10):
        data = _make_classification(n_samples=length, n_features=num_features, n_classes=num_classes, random_state=42)
        super().__init__(data, x_type=torch.float32, y_type=torch.long, batch_size=batch_size)


# --------------------------------------------------------------------------------------------
# tests/helpers/simple_models.py (ClassificationModel)
# --------------------------------------------------------------------------------------------


class Accuracy(torch.nn.Module):
    """Stands for 1.4's ``pytorch_lightning.metrics.Accuracy`` as these tests use it: calling it
    returns the batch's accuracy (a tensor), as the metric's ``forward`` did."""

    def forward(self, preds, target):
        return (preds.argmax(dim=1) == target).float().mean()


class ClassificationModel(LightningModule):
    def __init__(self, lr=0.01):
        super().__init__()

        self.lr = lr
        for i in range(3):
            setattr(self, f"layer_{i}", torch.nn.Linear(32, 32))
            setattr(self, f"layer_{i}a", torch.nn.ReLU())
        setattr(self, "layer_end", torch.nn.Linear(32, 3))

        self.train_acc = Accuracy()
        self.valid_acc = Accuracy()
        self.test_acc = Accuracy()

    def forward(self, x):
        x = self.layer_0(x)
        x = self.layer_0a(x)
        x = self.layer_1(x)
        x = self.layer_1a(x)
        x = self.layer_2(x)
        x = self.layer_2a(x)
        x = self.layer_end(x)
        logits = torch.nn.functional.softmax(x, dim=1)
        return logits

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return [optimizer], []

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.forward(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        self.log("train_loss", loss, prog_bar=True)
        self.log("train_acc", self.train_acc(logits, y), prog_bar=True)
        return {"loss": loss}

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.forward(x)
        self.log("val_loss", torch.nn.functional.cross_entropy(logits, y), prog_bar=False)
        self.log("val_acc", self.valid_acc(logits, y), prog_bar=True)

    def test_step(self, batch, batch_idx):
        x, y = batch
        logits = self.forward(x)
        self.log("test_loss", torch.nn.functional.cross_entropy(logits, y), prog_bar=False)
        self.log("test_acc", self.test_acc(logits, y), prog_bar=True)


# --------------------------------------------------------------------------------------------
# tests/helpers/utils.py, tests/helpers/runif.py
# --------------------------------------------------------------------------------------------


def reset_seed(seed=0):
    seed_everything(seed)


@contextmanager
def no_warning_call(warning_type, match: Optional[str] = None):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        yield

    for w in record:
        if issubclass(w.category, warning_type) and (match is None or match in str(w.message)):
            raise AssertionError(f"`{warning_type}` was raised: {w}")


_NOT_HERE = {
    "tpu": "a TPU",
    "ipu": "an IPU",
    "horovod": "Horovod",
    "deepspeed": "DeepSpeed",
    "amp_apex": "NVIDIA Apex",
    "fairscale": "FairScale",
    "quantization": "Lightning's QuantizationAwareTraining",
}


def RunIf(
    *args: Any,
    min_gpus: int = 0,
    min_torch: Optional[str] = None,
    skip_windows: bool = False,
    special: bool = False,
    amp_native: bool = False,
    **kwargs: Any,
):
    """1.4's ``RunIf``, for the conditions these tests use: a GPU, TPU, ... condition skips where
    it is not met, ``special=True`` (1.4: a test run in a process of its own, 2 GPUs) always."""
    reasons = []
    if min_gpus and torch.cuda.device_count() < min_gpus:
        reasons.append(f"needs {min_gpus} GPU(s) (1.4's RunIf(min_gpus={min_gpus}))")
    if min_torch and Version(torch.__version__) < Version(min_torch):
        reasons.append(f"needs torch >= {min_torch}")
    if skip_windows and sys.platform == "win32":
        reasons.append("unimplemented on Windows")
    if amp_native and not torch.cuda.is_available():
        reasons.append("needs native AMP on a GPU (1.4's RunIf(amp_native=True))")
    for name, what in _NOT_HERE.items():
        if kwargs.get(name):
            reasons.append(f"needs {what} (1.4's RunIf({name}=True))")
    if special:
        reasons.append("1.4's RunIf(special=True): a multi-GPU standalone test")
    return pytest.mark.skipif(bool(reasons), reason="; ".join(reasons) or "runs")


# --------------------------------------------------------------------------------------------
# Why a ported test is skipped: each reason names the row of docs/flags.md's "Differences from
# Lightning" table (FLAGS_ROW), or the Lightning 2.x change ddpkit follows, that says why.
# --------------------------------------------------------------------------------------------

FLAGS_ROW = "docs/flags.md, Differences from Lightning, row "

CURRENT_EPOCH_2X = (
    "1.x's trainer.current_epoch at on_train_end / after fit is the last epoch's index; ddpkit follows "
    "Lightning 2.x (epochs completed: one more): " + FLAGS_ROW + "'1.x: trainer.current_epoch after fit'"
)
GLOBAL_STEP_2X = (
    "1.x's trainer.global_step during an epoch's validation is one less; ddpkit follows Lightning 2.x "
    "(Lightning 2.6 ends this run on ddpkit's step): " + FLAGS_ROW + "'1.4's hook order at an epoch's end'"
)
STEP_IN_NAMES_2X = (
    "1.x names checkpoints and logs steps with global_step - 1 and stores epoch + 1; ddpkit follows "
    "Lightning 2.x: " + FLAGS_ROW + "'1.x: trainer.current_epoch after fit'"
)
DEV_DEBUGGER = (
    "reads 1.x internals (trainer.dev_debugger, PL_DEV_DEBUG): " + FLAGS_ROW + "'1.x internals the tests reach'"
)
INTERNALS = "reads 1.x internals ({}): " + FLAGS_ROW + "'1.x internals the tests reach'"
NO_MONITOR = (
    "EarlyStopping() without monitor: " + FLAGS_ROW + "'1.x: EarlyStopping() without monitor watched early_stop_on'"
)
DEFAULT_LOGGER = (
    "expects 1.x's default logger layout (lightning_logs/version_N, its checkpoints/): "
    + FLAGS_ROW
    + "'the Trainer's default logger'"
)
CALLBACK_STATE_2X = (
    "1.x's Callback.on_save_checkpoint returned the callback's state and checkpoints keyed it by the "
    "callback's type; ddpkit follows Lightning 2.x (state_dict() under state_key, docs/training.md, Callbacks)"
)
NOT_IN_DDPKIT = "ddpkit has no {} ({})"


class Absent:
    """Stands for a 1.x name that ddpkit does not have by design (the tests that use it are
    skipped, each naming why); using it fails the test that does."""

    def __init__(self, path: str) -> None:
        object.__setattr__(self, "_path", path)

    def _fail(self) -> Any:
        pytest.fail(f"ddpkit has no {object.__getattribute__(self, '_path')}", pytrace=False)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # what pytest's collection and copy/pickle look for
            raise AttributeError(name)
        return self._fail()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fail()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> Any:
        return self._fail()

    def __instancecheck__(self, instance: Any) -> bool:
        return bool(self._fail())


MESSAGE_FORM = (
    "ddpkit does what 1.4 did here, but says it in its own words (the call, the problem with its numbers, "
    "one fix: docs/flags.md, Errors), not with the 1.4 phrase this test matches"
)
NOT_BY_DESIGN = FLAGS_ROW + "'`dp`, `ddp2`, `ddp_sharded`, `deepspeed`, `horovod`, TPU / IPU'"
MODERN_DEVICES = (
    "Trainer(accelerator='cpu', devices=N) runs subprocess DDP, Lightning 2.x's default (1.4: ddp_spawn): "
    'docs/flags.md, What common calls resolve to, row `Trainer(accelerator="cpu", devices=2)`'
)
SETUP_DISTRIBUTED = (
    "mocks 1.x's DDPPlugin.setup_distributed to fit as one rank of a job whose peers never start: "
    + FLAGS_ROW
    + "'1.x internals the tests reach' (the environments these rows choose are ddpkit's own tests: "
    "tests/plugins/environments, tests/connector)"
)


def rank_zero_only(fn):
    """1.4's ``pytorch_lightning.utilities.rank_zero_only`` (``distributed.py``): ``fn`` runs on
    global rank zero only (its rank read from the environment, as 1.4's default was)."""

    @functools.wraps(fn)
    def wrapped_fn(*args, **kwargs):
        if rank_zero_only.rank == 0:
            return fn(*args, **kwargs)
        return None

    return wrapped_fn


rank_zero_only.rank = int(os.environ.get("LOCAL_RANK", 0))


def pl_load(path_or_url, map_location=None):
    """1.4's ``pytorch_lightning.utilities.cloud_io.load`` for a local file: ``torch.load`` of the
    whole checkpoint (torch < 2.6 loaded every object by default; ``weights_only=False`` here)."""
    return torch.load(path_or_url, map_location=map_location, weights_only=False)
