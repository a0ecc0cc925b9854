"""The module and the data of the Lightning twin runs (tests/callbacks/lightning_twin.py): one
linear regression built on ``pytorch_lightning.LightningModule`` or ``ddpkit.Module`` from the
same *spec* — what it logs in which hook, its optimizer and schedulers, its hyperparameters,
whether its loaders come from its own ``*_dataloader`` hooks — and the loaders both runs get."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    RandomSampler,
    Sampler,
    SequentialSampler,
    TensorDataset,
)

#: (hook, name, self.log keywords): what the module logs by default. A ``"dict": True`` among
#: the keywords logs through ``self.log_dict`` (two values, ``<name>_a`` and ``<name>_b``).
LOGS: list[tuple[str, str, dict[str, Any]]] = [
    ("training_step", "loss", {}),
    ("training_step", "train_acc", {"on_step": True, "on_epoch": True, "prog_bar": True}),
    ("training_step", "hidden", {"logger": False, "on_epoch": True}),
    ("validation_step", "val_loss", {"prog_bar": True}),
    ("validation_step", "val_max", {"reduce_fx": "max"}),
    ("on_validation_epoch_end", "val_epoch_end", {}),
    ("on_train_epoch_end", "train_epoch_end", {}),
    ("test_step", "test_loss", {}),
    ("test_step", "test_quiet", {"logger": False}),
]

#: the module hooks (besides the *_step methods) where a spec may log; each logs a value made
#: of the epoch and, in a batch hook, the batch index, so that every call logs its own value
LOG_HOOKS = (
    "on_train_start",
    "on_train_epoch_start",
    "on_train_batch_start",
    "on_train_batch_end",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_train_epoch_end",
    "on_validation_start",
    "on_validation_epoch_start",
    "on_validation_batch_end",
    "on_validation_epoch_end",
    "on_test_epoch_start",
    "on_test_batch_end",
    "on_test_epoch_end",
)


def _scheduler(kind: str, optimizer: torch.optim.Optimizer) -> Any:
    sched = torch.optim.lr_scheduler
    made: dict[str, Callable[[], Any]] = {
        "step": lambda: sched.StepLR(optimizer, step_size=1, gamma=0.5),
        "step2": lambda: sched.StepLR(optimizer, step_size=2, gamma=0.7),
        "exponential": lambda: sched.ExponentialLR(optimizer, gamma=0.8),
        "cosine": lambda: sched.CosineAnnealingLR(optimizer, T_max=4),
        "onecycle": lambda: sched.OneCycleLR(optimizer, max_lr=0.5, total_steps=64),
        "plateau": lambda: sched.ReduceLROnPlateau(optimizer, factor=0.5, patience=0),
    }
    return made[kind]()


def _optimizers(module: nn.Module, spec: dict[str, Any]) -> Any:
    groups = spec.get("param_groups")
    params: Any = list(module.parameters())  # a list: each optimizer gets every parameter
    if groups:
        weights, bias = module.layer.weight, module.layer.bias
        params = [
            {"params": [weights], **({"name": groups[0]} if groups[0] else {})},
            {"params": [bias], "lr": 0.01, **({"name": groups[1]} if groups[1] else {})},
        ]
    kind = spec.get("optimizer", "sgd")
    make = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        "adam": lambda p: torch.optim.Adam(p, lr=0.1),
        "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
    }[kind]
    optimizers = [make(params) for _ in range(spec.get("optimizers", 1))]
    # ``scheduler``: one StepLR's config (the hand-picked cases); ``schedulers``: configs with a
    # ``kind`` each (the grid), all on the first optimizer
    configs = [{"kind": "step", **spec["scheduler"]}] if spec.get("scheduler") else []
    configs += spec.get("schedulers") or []
    if not configs:
        return optimizers if len(optimizers) > 1 else optimizers[0]
    made = [
        {
            "scheduler": _scheduler(c["kind"], optimizers[0]),
            **{k: v for k, v in c.items() if k != "kind"},
        }
        for c in configs
    ]
    if len(made) == 1:
        return {"optimizer": optimizers[0], "lr_scheduler": made[0]}
    return [optimizers[0]], made


def twin_module(base: type, logs: list[tuple[str, str, dict[str, Any]]], **spec: Any) -> Any:
    """A linear regression whose hooks log ``logs``. ``spec``: ``optimizers`` (1 or 2),
    ``optimizer`` (sgd, adam, adagrad), ``param_groups`` (names or None), ``scheduler`` /
    ``schedulers`` (see :func:`_optimizers`), ``hparams`` (a dict given to
    ``save_hyperparameters``), ``own_loaders`` (a loader spec: the module's ``*_dataloader``
    hooks make the loaders, each call on new data, and count the calls in ``loader_calls``),
    ``fail_at_step`` (training_step raises a RuntimeError at that global step)."""

    def log_all(self: Any, hook: str, value: torch.Tensor) -> None:
        for where, name, kwargs in logs:
            if where != hook:
                continue
            options = {k: v for k, v in kwargs.items() if k != "dict"}
            value = value.detach() + len(name) * 0.01
            if kwargs.get("dict"):
                self.log_dict({f"{name}_a": value, f"{name}_b": value * 2}, **options)
            else:
                self.log(name, value, **options)

    def hook_logging(hook: str) -> Callable[..., Any]:
        def logging_hook(self: Any, *args: Any) -> None:
            batch_idx = next((a for a in args if isinstance(a, int)), 0)
            log_all(self, hook, torch.tensor(float(self.current_epoch) + 0.1 * batch_idx))

        return logging_hook

    class Twin(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = nn.Linear(2, 1)
            self.loader_calls: list[str] = []
            if spec.get("hparams"):
                self.save_hyperparameters(dict(spec["hparams"]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = F.mse_loss(self(x), y)
            log_all(self, "training_step", loss)
            if spec.get("fail_at_step") == self.global_step:
                raise RuntimeError(f"the twin fails at step {self.global_step}")
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            log_all(self, "validation_step", F.mse_loss(self(x), y))

        def test_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            log_all(self, "test_step", F.mse_loss(self(x), y))

        def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
            x, _ = batch
            return self(x)

        def configure_optimizers(self) -> Any:
            return _optimizers(self, spec)

    hooks = {hook for hook, _, _ in logs if hook in LOG_HOOKS}
    for hook in hooks:
        setattr(Twin, hook, hook_logging(hook))
    if spec.get("own_loaders") is not None:
        for stage in ("train", "val", "test", "predict"):
            setattr(Twin, f"{stage}_dataloader", _own_loader(stage, spec["own_loaders"]))
    return Twin()


def _own_loader(stage: str, loader: dict[str, Any]) -> Callable[[Any], DataLoader[Any]]:
    def make(self: Any) -> DataLoader[Any]:
        self.loader_calls.append(stage)
        # each call draws other data: a loader asked again shows in the weights and metrics
        return data(**{**loader, "seed": len(self.loader_calls)}, train=stage == "train")

    return make


class EveryOther(Sampler[int]):
    """A sampler of the user's (neither random nor sequential): the even indices, then the odd."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Any:
        return iter([*range(0, self.n, 2), *range(1, self.n, 2)])


def data(
    n: int = 16,
    batch: int = 4,
    shuffle: bool = False,
    *,
    drop_last: bool = False,
    sampler: str | None = None,
    seed: int = 0,
    train: bool = True,
) -> DataLoader[Any]:
    """``n`` samples of ``y = 2 x0 - x1`` in batches of ``batch``. ``sampler``: ``"random"``
    (a seeded RandomSampler), ``"every_other"`` (:class:`EveryOther`) or ``"batch_sampler"``
    (a BatchSampler over a SequentialSampler) in place of ``shuffle``. ``shuffle`` and a
    sampler apply to a training loader only (``train``)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=g)
    dataset = TensorDataset(x, x @ torch.tensor([[2.0], [-1.0]]))
    if not train or sampler is None:
        return DataLoader(dataset, batch_size=batch, shuffle=shuffle and train, drop_last=drop_last)
    if sampler == "batch_sampler":
        batches = BatchSampler(SequentialSampler(dataset), batch, drop_last)
        return DataLoader(dataset, batch_sampler=batches)
    chosen: Sampler[int] = (
        RandomSampler(dataset, generator=torch.Generator().manual_seed(1))
        if sampler == "random"
        else EveryOther(n)
    )
    return DataLoader(dataset, batch_size=batch, sampler=chosen, drop_last=drop_last)
