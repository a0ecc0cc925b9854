"""``distribute``: each rank's shard in DDP; ``num_batches``; ``move_to_device``."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    TensorDataset,
)

from ddpkit import MisconfigurationError
from ddpkit.core._batch import move_to_device
from ddpkit.trainer._data import ShardSampler, distribute, num_batches

DATA = TensorDataset(torch.arange(10).float())


def indices(loader: DataLoader[Any]) -> list[int]:
    return [int(v) for (batch,) in loader for v in batch]


def shards(loader: DataLoader[Any], **kwargs: Any) -> list[list[int]]:
    return [indices(distribute(loader, rank=r, world_size=2, seed=0, **kwargs)) for r in (0, 1)]


def test_training_shards_are_disjoint_shuffled_and_cover_the_data() -> None:
    loader = DataLoader(DATA, batch_size=2, shuffle=True)
    rank0, rank1 = shards(loader, train=True)
    assert set(rank0).isdisjoint(rank1)
    assert sorted(rank0 + rank1) == list(range(10))
    assert rank0 + rank1 != [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]  # shuffled
    assert shards(loader, train=True) == [rank0, rank1]  # the same on every call (seeded)


def test_evaluation_shards_are_not_shuffled() -> None:
    loader = DataLoader(DATA, batch_size=2, shuffle=True)
    assert shards(loader, train=False) == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]


def test_training_shuffles_an_unshuffled_loader_as_lightning_does() -> None:
    """Lightning 2.x's ``_process_dataloader``: a training loader's DistributedSampler shuffles
    whatever the loader said (``is_shuffled = True`` for the training stage); overfit_batches
    keeps the order (``shuffle and not overfit_batches``)."""
    found = shards(DataLoader(DATA, batch_size=2), train=True)
    lightning = [list(DistributedSampler(DATA, 2, r, shuffle=True, seed=0)) for r in (0, 1)]
    assert found == lightning and found != [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    overfit = shards(DataLoader(DATA, batch_size=2), train=True, overfit=True)
    assert overfit == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]


def test_the_shuffle_changes_with_set_epoch() -> None:
    loader = distribute(
        DataLoader(DATA, batch_size=2, shuffle=True), rank=0, world_size=2, train=True, seed=0
    )
    assert isinstance(loader.sampler, DistributedSampler)
    first = indices(loader)
    loader.sampler.set_epoch(1)
    assert indices(loader) != first


def test_the_seed_decides_the_shuffle() -> None:
    loader = DataLoader(DATA, batch_size=2, shuffle=True)
    a = indices(distribute(loader, rank=0, world_size=2, train=True, seed=0))
    b = indices(distribute(loader, rank=0, world_size=2, train=True, seed=1))
    assert a != b


def test_predict_shards_are_contiguous_blocks_without_padding() -> None:
    """Rank zero's block first: the ranks' batches one after another are the dataset's order."""
    data = TensorDataset(torch.arange(5).float())
    loader = DataLoader(data, batch_size=2)
    rank0, rank1 = shards(loader, train=False, predict=True)
    assert (rank0, rank1) == ([0, 1, 2], [3, 4])
    assert [len(ShardSampler(5, r, 2)) for r in (0, 1)] == [3, 2]
    assert [list(ShardSampler(7, r, 3)) for r in range(3)] == [[0, 1, 2], [3, 4], [5, 6]]
    assert [list(ShardSampler(2, r, 3)) for r in range(3)] == [[0], [1], []]


def test_evaluation_shards_pad_to_equal_length() -> None:
    """DistributedSampler repeats samples so every rank runs as many batches (collectives)."""
    loader = DataLoader(TensorDataset(torch.arange(5).float()), batch_size=2)
    rank0, rank1 = shards(loader, train=False)
    assert len(rank0) == len(rank1) == 3


def test_the_users_loader_options_are_kept_and_the_loader_untouched() -> None:
    def collate(rows: list[Any]) -> str:
        return "collated"

    loader = DataLoader(DATA, batch_size=3, shuffle=True, drop_last=True, collate_fn=collate)
    out = distribute(loader, rank=1, world_size=2, train=True, seed=0)
    assert out is not loader
    assert (out.batch_size, out.drop_last, out.collate_fn) == (3, True, collate)
    assert list(out) == ["collated"]  # 5 samples per rank, batches of 3, the last dropped
    assert not isinstance(loader.sampler, DistributedSampler)


@pytest.mark.parametrize("world_size", [1, 2])
def test_left_alone(world_size: int) -> None:
    loader = DataLoader(DATA, batch_size=2, shuffle=True)
    kept = distribute(
        loader, rank=0, world_size=world_size, train=True, seed=0, use_distributed_sampler=False
    )
    assert kept is loader
    assert distribute(loader, rank=0, world_size=1, train=True, seed=0) is loader


def test_a_distributed_sampler_of_the_users_is_kept() -> None:
    sampler = DistributedSampler(DATA, num_replicas=2, rank=1, shuffle=False)
    loader = DataLoader(DATA, batch_size=2, sampler=sampler)
    assert distribute(loader, rank=1, world_size=2, train=True, seed=0) is loader


def test_an_iterable_dataset_is_left_to_shard_itself() -> None:
    class Stream(IterableDataset[int]):
        def __iter__(self) -> Iterator[int]:
            return iter(range(4))

    loader = DataLoader(Stream(), batch_size=2)
    assert distribute(loader, rank=0, world_size=2, train=True, seed=0) is loader


class EveryOther(Sampler[int]):
    def __iter__(self) -> Iterator[int]:
        return iter(range(0, 10, 2))

    def __len__(self) -> int:
        return 5


def test_a_custom_sampler_is_a_clear_error() -> None:
    loader = DataLoader(DATA, batch_size=2, sampler=EveryOther())
    with pytest.raises(
        MisconfigurationError,
        match=r"custom sampler \(EveryOther\).*use_distributed_sampler=False",
    ):
        distribute(loader, rank=0, world_size=2, train=True, seed=0)


class Pairs(BatchSampler):
    pass


@pytest.mark.parametrize("kind", [BatchSampler, Pairs])
def test_a_batch_sampler_is_rebuilt_around_the_shard(kind: type[BatchSampler]) -> None:
    """Lightning's rule: the user's batch sampler (BatchSampler or a subclass) is built again
    around a DistributedSampler, with its batch size, drop_last, and the shuffle of its own
    sampler (before, a plain one became single unbatched samples)."""
    loader = DataLoader(DATA, batch_sampler=kind(RandomSampler(DATA), 2, False))
    out = [distribute(loader, rank=r, world_size=2, train=True, seed=0) for r in (0, 1)]
    assert all(type(o.batch_sampler) is kind for o in out)
    batches = [[[int(v) for v in batch] for (batch,) in o] for o in out]
    assert [len(b) for b in batches] == [3, 3] and all(len(x) == 2 for b in batches for x in b[:2])
    flat = [v for b in batches for x in b for v in x]
    assert sorted(set(flat)) == list(range(10)) and flat != sorted(flat)  # shuffled, covered
    assert type(loader.batch_sampler) is kind and loader.batch_sampler.batch_size == 2  # as it was
    even = DataLoader(DATA, batch_size=2, shuffle=True)  # the same shard as a loader's own
    assert batches[0] == [[int(v) for v in b] for (b,) in distribute(even, rank=0, world_size=2,
                                                                     train=True, seed=0)]  # fmt: skip


def test_a_batch_sampler_that_cannot_be_rebuilt_is_a_clear_error() -> None:
    class Windows(BatchSampler):
        def __init__(self, sampler: Sampler[int], width: int) -> None:
            super().__init__(sampler, width, False)

    loader = DataLoader(DATA, batch_sampler=Windows(SequentialSampler(DATA), 2))
    with pytest.raises(
        MisconfigurationError, match=r"Windows\(sampler, batch_size=2, drop_last=False\) raised"
    ):
        distribute(loader, rank=0, world_size=2, train=True, seed=0)


def test_a_custom_sampler_inside_a_batch_sampler_is_a_clear_error() -> None:
    loader = DataLoader(DATA, batch_sampler=BatchSampler(EveryOther(), 2, False))
    with pytest.raises(
        MisconfigurationError, match=r"custom sampler \(EveryOther\) in its batch_sampler"
    ):
        distribute(loader, rank=0, world_size=2, train=True, seed=0)


def test_a_dataloader_subclass_stays_its_class() -> None:
    class Tagged(DataLoader[Any]):
        def __init__(self, dataset: Any, tag: str, **kwargs: Any) -> None:
            super().__init__(dataset, **kwargs)
            self.tag = tag

    loader = Tagged(DATA, "mine", batch_size=2, shuffle=True)
    out = distribute(loader, rank=1, world_size=2, train=True, seed=0)
    assert type(out) is Tagged and out.tag == "mine" and out.batch_size == 2
    assert isinstance(out.sampler, DistributedSampler) and out.sampler.rank == 1


# -- num_batches ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(None, 5), (3, 3), (10, 5), (0, 0), (0.5, 2), (1.0, 5), (0.0, 0), (0.99, 4)],
)
def test_num_batches(limit: float | None, expected: int) -> None:
    assert num_batches(DataLoader(DATA, batch_size=2), limit) == expected


def test_num_batches_of_a_loader_without_length() -> None:
    class Stream(IterableDataset[int]):
        def __iter__(self) -> Iterator[int]:
            return iter(range(4))

    loader = DataLoader(Stream(), batch_size=2)
    assert num_batches(loader, None) is None
    assert num_batches(loader, 3) == 3
    with pytest.raises(MisconfigurationError, match=r"a fraction needs a loader with a length"):
        num_batches(loader, 0.5)


@pytest.mark.parametrize(
    ("limit", "message"),
    [(1.5, r"a fraction must lie in \[0, 1\]"), (-0.1, r"in \[0, 1\]"), (True, "an int or")],
)
def test_num_batches_rejects(limit: Any, message: str) -> None:
    with pytest.raises(MisconfigurationError, match=message):
        num_batches(DataLoader(DATA, batch_size=2), limit)


# -- move_to_device -------------------------------------------------------------------------


def test_move_to_device_keeps_the_structure() -> None:
    Point = namedtuple("Point", ["x", "y"])
    batch = {"a": [torch.ones(1), (torch.zeros(1), "label")], "p": Point(torch.ones(1), 3)}
    moved = move_to_device(batch, torch.device("meta"))
    assert moved["a"][0].device.type == "meta"
    assert moved["a"][1][0].device.type == "meta"
    assert moved["a"][1][1] == "label"
    assert isinstance(moved["p"], Point)
    assert (moved["p"].x.device.type, moved["p"].y) == ("meta", 3)
    same = torch.ones(1)
    assert move_to_device(same, torch.device("cpu")) is same
