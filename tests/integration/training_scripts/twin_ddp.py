"""Two real gloo ranks (``strategy="ddp"``, the script re-run for rank 1) of real Lightning 2.x or
of ddpkit, on the same module and data: each rank writes what it saw to ``<out>/rank<r>.json`` —
the sample indices of every training and validation batch (by epoch), the ones it predicted and
what ``trainer.predict`` returned to it, the ``sync_dist`` metrics and the final weights
(tests/integration/test_same_as_lightning_ddp.py compares the two libraries rank by rank).

Usage: ``python twin_ddp.py --lib lightning|ddpkit --case NAME --out DIR``
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

#: case -> (training loader keywords, evaluation loader keywords, Trainer keywords, calls)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any], list[str]]] = {
    # a shuffled loader over two epochs (set_epoch), an uneven validation set (padded shards)
    "shuffled, uneven validation": (
        {"n": 16, "batch_size": 2, "shuffle": True},
        {"n": 7, "batch_size": 2},
        {"max_epochs": 2},
        ["fit"],
    ),
    # a loader in order: Lightning's training shard is shuffled whatever the loader said
    "in order": (
        {"n": 16, "batch_size": 2},
        {"n": 8, "batch_size": 2},
        {"max_epochs": 2, "num_sanity_val_steps": 0},
        ["fit"],
    ),
    # predict on two ranks: which samples each rank predicts, and what predict returns to it
    "predict": (
        {"n": 8, "batch_size": 2},
        {"n": 11, "batch_size": 2},
        {"max_epochs": 1, "limit_train_batches": 1},
        ["fit", "predict"],
    ),
}


class Indices(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Sample i is (i, 2i): a batch tells which samples it holds."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor([float(i)]), torch.tensor([2.0 * i])


def _ints(x: torch.Tensor) -> list[int]:
    return [int(v) for v in x.view(-1)]


def twin_class(base: type) -> type:
    class Twin(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer = nn.Linear(1, 1)
            self.seen: dict[str, list[Any]] = {"train": [], "val": [], "predict": []}

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x / 20)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            self.seen["train"].append([self.current_epoch, _ints(x)])
            loss = F.mse_loss(self(x), y / 20)
            self.log("loss", loss, sync_dist=True)
            self.log("rank_sum", float(self.global_rank + 1), sync_dist=True, reduce_fx="sum")
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            if not self.trainer.sanity_checking:
                self.seen["val"].append([self.current_epoch, _ints(x)])
            self.log("val_loss", F.mse_loss(self(x), y / 20), sync_dist=True)

        def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
            x, _ = batch
            self.seen["predict"].append(_ints(x))
            return x.view(-1)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Twin


def _loader(n: int, **kwargs: Any) -> DataLoader[Any]:
    return DataLoader(Indices(n), **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", choices=["lightning", "ddpkit"], required=True)
    parser.add_argument("--case", choices=sorted(CASES), required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.lib == "lightning":
        import pytorch_lightning as lib

        base = lib.LightningModule
    else:
        import ddpkit as lib

        base = lib.Module
    train, evaluation, keywords, calls = CASES[args.case]
    trainer = lib.Trainer(accelerator="cpu", devices=2, strategy="ddp", logger=False,
                          enable_checkpointing=False, enable_progress_bar=False,
                          enable_model_summary=False, default_root_dir=args.out, **keywords)  # fmt: skip
    model = twin_class(base)()
    returned = None
    for call in calls:
        if call == "fit":
            trainer.fit(model, _loader(**train), _loader(**evaluation))
        else:
            found = trainer.predict(model, _loader(**evaluation))
            returned = [_ints(t) for t in found] if found is not None else None
    out = {
        "seen": model.seen,
        "predict returned": returned,
        "callback_metrics": {
            k: round(float(v), 4) for k, v in sorted(trainer.callback_metrics.items())
        },
        "weights": {
            k: [round(float(v), 4) for v in t.view(-1)] for k, t in model.state_dict().items()
        },
        "global_step": trainer.global_step,
    }
    (Path(args.out) / f"rank{trainer.global_rank}.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
