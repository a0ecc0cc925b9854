"""The two-rank rows of the by-effect comparison (tests/callbacks/test_same_as_lightning.py has
the rest): under subprocess DDP and under spawn, each rank's batches from a loader with a batch
sampler of the user's are the ones Lightning 2.x builds for it (its own ``_update_dataloader``
around its ``DistributedSampler``, computed here in one process), and ``sync_dist`` values are
Lightning's reductions across the ranks (the mean, sum and max of the ranks' values at every
step; the epoch mean weighted by ``batch_size``).

Before: ddpkit rebuilt a loader with a batch sampler with ``batch_size=None``, so each rank got
single, unbatched samples, in order.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import BatchSampler, DataLoader
from training_scripts.batch_samplers import Recorder, Threes, loaders

from ddpkit import Trainer

# Importing Lightning exports PYTORCH_NVML_BASED_CUDA_CHECK (its process-wide setting): done at
# collection, the root conftest's environment guard does not blame the test.
with contextlib.suppress(ImportError):
    import pytorch_lightning  # noqa: F401


def lightning_batches(loader: DataLoader[Any], shuffle: bool) -> list[list[list[int]]]:
    """What Lightning 2.x feeds each of two ranks from ``loader`` (its data connector's sampler,
    its ``_update_dataloader``); a plain BatchSampler is given as the subclass Lightning can
    rebuild (docs/flags.md: Lightning drops a plain one's batch size)."""
    pl_data = pytest.importorskip("pytorch_lightning.utilities.data")
    from torch.utils.data import DistributedSampler

    if type(loader.batch_sampler) is BatchSampler:
        inner = loader.batch_sampler
        loader = DataLoader(loader.dataset,
                            batch_sampler=Threes(inner.sampler, inner.batch_size, inner.drop_last))  # fmt: skip
    out = []
    for rank in (0, 1):
        sampler = DistributedSampler(loader.dataset, num_replicas=2, rank=rank, shuffle=shuffle,
                                     seed=0)  # fmt: skip
        rebuilt = pl_data._update_dataloader(loader, sampler)
        out.append([[int(v) for v in batch] for batch in rebuilt])
    return out


@pytest.mark.standalone
@pytest.mark.timeout(240)
@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_batch_samplers_and_sync_dist_as_in_lightning(shared_dir: Path, strategy: str) -> None:
    trainer = Trainer(
        accelerator="cpu",
        devices=2,
        strategy=strategy,
        max_epochs=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=shared_dir,
    )
    train, val = loaders()
    trainer.fit(Recorder(str(shared_dir)), train, val)
    if trainer.global_rank != 0:
        return  # rank 1 re-ran this test (subprocess DDP) and wrote its file
    ranks = [json.loads((shared_dir / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["seen"]["train"] for r in ranks] == lightning_batches(train, shuffle=True)
    assert [r["seen"]["val"] for r in ranks] == lightning_batches(val, shuffle=False)
    assert all(len(b) == 4 for r in ranks for b in r["seen"]["train"])  # batches of 4, as given
    for metrics in (r["metrics"] for r in ranks):
        assert metrics["rank_mean"] == 0.5 and metrics["rank_sum"] == 3.0
        assert metrics["rank_max"] == 1.0
        assert metrics["weighted"] == pytest.approx((1.0 * 1 + 4.0 * 3) / 4)
    assert not (shared_dir / "lightning_logs").exists()
