"""ddpkit's own exchanges between ranks go as JSON / bytes in tensors, never as pickles: what a
rank sends arrives whole (lengths differ by rank), a checkpoint's save plan round-trips exactly,
and the ranks' predictions arrive in order — while a prediction that ``torch.load(weights_only=
True)`` would not build is refused, naming the class (no rank unpickles another's code)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import MisconfigurationError, Trainer
from ddpkit.callbacks._checkpoint import SaveDecision
from ddpkit.testing._distributed import DistInfo
from ddpkit.utilities import _rng as rng


class Box:
    """A prediction of a class of the user's own."""

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value


class Predicts(ddpkit.Module):
    def __init__(self, boxed: bool = False) -> None:
        super().__init__()
        self.boxed = boxed

    def predict_step(self, batch: Any, batch_idx: int) -> Any:
        x = batch[0]
        return Box(x) if self.boxed else {"x": x, "rank": self.trainer.global_rank}


@pytest.mark.distributed(world_size=2, timeout=120)
def test_ddpkits_own_exchanges_between_two_ranks(dist: DistInfo, tmp_path: Path) -> None:
    trainer = Trainer(
        accelerator="cpu", devices=2, strategy="ddp", logger=False, default_root_dir=tmp_path
    )
    plugin = trainer.strategy
    mine = b"x" * (3 + 1000 * dist.rank)  # another length on each rank
    assert plugin.all_gather_bytes(mine) == [b"x" * 3, b"x" * 1003]
    assert plugin.all_gather_bytes(b"") == [b"", b""]
    sent = {"path": "/c/epoch=1.ckpt", "n": [1, 2.5, None], "inf": math.inf}
    got = plugin.broadcast_json(sent if dist.rank == 0 else None)
    assert got == sent
    states = [rng.decode(b) for b in plugin.all_gather_bytes(rng.encode(rng.capture()))]
    assert torch.equal(states[dist.rank]["torch"], torch.get_rng_state())

    data = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=2)  # 2 batches per rank
    predictions = trainer.predict(Predicts(), data)
    assert predictions is not None
    assert [p["rank"] for p in predictions] == [0, 0, 1, 1]
    assert torch.equal(torch.cat([p["x"] for p in predictions]), torch.arange(8.0))
    with pytest.raises(MisconfigurationError, match=r"hold \S*Box, which torch\.load"):
        trainer.predict(Predicts(boxed=True), data)


def test_a_save_decision_goes_as_json_and_comes_back_exactly() -> None:
    score = torch.tensor(0.1234567, dtype=torch.float32)
    plan = SaveDecision(
        saves=["/c/a.ckpt"],
        link=("/c/a.ckpt", "/c/last.ckpt"),
        removes=["/c/old.ckpt"],
        state={
            "best_model_path": "/c/a.ckpt",
            "best_model_score": score,
            "best_k_models": {"/c/a.ckpt": score},
            "kth_best_model_path": "/c/a.ckpt",
            "kth_value": torch.tensor(math.inf),
            "last_model_path": "/c/last.ckpt",
            "current_score": None,
        },
    )
    import json

    back = SaveDecision.from_json(json.loads(json.dumps(plan.to_json())))
    assert (back.saves, back.link, back.removes) == (plan.saves, plan.link, plan.removes)
    assert torch.equal(back.state["best_model_score"], score)
    assert back.state["best_model_score"].dtype == torch.float32
    assert torch.equal(back.state["best_k_models"]["/c/a.ckpt"], score)
    assert math.isinf(float(back.state["kth_value"])) and back.state["current_score"] is None
