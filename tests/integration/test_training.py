"""Every training type really trains: real ranks, real gloo, compared with hand-written DDP.

Each distributed test runs in a fresh interpreter of its own (``@pytest.mark.standalone``): the
subprocess launcher re-runs exactly that test id for rank 1, so rank 1 executes the same test
body, trains, writes its result file at ``on_fit_end`` and returns; rank zero (the test's own
process) compares every rank's file with the reference. Spawned ranks write the same files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

# DDP imports torch._dynamo lazily, and that import exports TORCHINDUCTOR_CACHE_DIR (torch's own
# process-wide setting); imported at collection, the root conftest's environment guard does not
# blame the first test that wraps a model in DDP.
import torch._dynamo
from torch.utils.data import DataLoader
from training_scripts.regression import (
    BATCH,
    N_SAMPLES,
    SAMPLER_SEED,
    CountingDDPPlugin,
    Regressor,
    hand_written_ddp,
    make_dataset,
    shard_indices,
    simulate_ddp,
    wait_for,
)

import ddpkit
from ddpkit import DDPKitDeprecationWarning, DDPPlugin, DDPSpawnPlugin, SingleDevicePlugin, Trainer
from ddpkit.core._saving import load_checkpoint
from ddpkit.testing._distributed import DistInfo
from ddpkit.trainer._lightning_loops import read_position

EPOCHS = 3
STEPS_PER_EPOCH = N_SAMPLES // (2 * BATCH)


@pytest.fixture
def seeded(monkeypatch: pytest.MonkeyPatch) -> int:
    """``seed_everything`` as a user calls it; monkeypatch restores the variables it exports."""
    for name in ("DDPKIT_SEED", "PL_GLOBAL_SEED", "PL_SEED_WORKERS"):
        monkeypatch.setenv(name, "0")
    return ddpkit.seed_everything(SAMPLER_SEED)


def net_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Regressor's weights, keyed like the bare network the references train."""
    return {k.removeprefix("net."): v.detach().cpu() for k, v in state.items()}


def assert_weights_close(
    actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]
) -> None:
    assert sorted(actual) == sorted(expected)
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=1e-5, atol=1e-6, msg=name)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# -- the reference itself --------------------------------------------------------------------


@pytest.mark.distributed(world_size=2, timeout=180)
def test_simulated_reference_equals_a_real_ddp_loop(dist: DistInfo) -> None:
    """The one-process simulation the tests compare with is what real DDP over gloo computes."""
    state = hand_written_ddp(epochs=EPOCHS)
    gathered: list[Any] = [None] * dist.world_size
    torch.distributed.all_gather_object(gathered, state)
    for name in state:
        assert torch.equal(gathered[0][name], gathered[1][name]), name
    assert_weights_close(state, simulate_ddp(epochs=EPOCHS))
    # ... and the comparison can fail: one rank's data alone trains other weights.
    one_rank = simulate_ddp(epochs=EPOCHS, world_size=1)
    assert not torch.allclose(one_rank["0.weight"], state["0.weight"], atol=1e-4)


# -- one process ---------------------------------------------------------------------------


def test_single_device_trains_like_the_hand_written_loop(tmp_path: Path, seeded: int) -> None:
    trainer = Trainer(
        max_epochs=EPOCHS, default_root_dir=tmp_path, enable_progress_bar=False, log_every_n_steps=1
    )
    assert type(trainer.strategy) is SingleDevicePlugin
    model = Regressor(tmp_path, tag="single")
    trainer.fit(model, DataLoader(make_dataset(), batch_size=BATCH))  # the user's order, kept
    result = torch.load(tmp_path / "single-rank0.pt", weights_only=True)
    assert (result["rank"], result["world_size"], result["pid"]) == (0, 1, os.getpid())
    losses = torch.tensor(result["record"]["losses"]).view(EPOCHS, N_SAMPLES // BATCH)
    assert losses[-1].mean() < 0.5 * losses[0].mean()
    assert result["record"]["indices"][0] == list(range(N_SAMPLES))  # no sampler inserted
    assert_weights_close(
        net_state(model.state_dict()), simulate_ddp(epochs=EPOCHS, world_size=1, shuffle=False)
    )
    assert (trainer.global_step, trainer.current_epoch) == (EPOCHS * N_SAMPLES // BATCH, EPOCHS)
    m = result["callback_metrics"]
    assert (m["rank_mean"], m["rank_max"], m["rank_local"]) == (0.0, 0.0, 0.0)


# -- the mission's four calls ----------------------------------------------------------------

MISSION: dict[str, tuple[Callable[[], dict[str, Any]], type, str]] = {
    "ddp_cpu": (
        lambda: {"accelerator": "ddp_cpu", "num_processes": 2},
        DDPSpawnPlugin,
        "spawn",
    ),
    "ddp_cpu+DDPSpawnPlugin": (
        lambda: {
            "accelerator": "ddp_cpu",
            "num_processes": 2,
            "plugins": [DDPSpawnPlugin(find_unused_parameters=True)],
        },
        DDPSpawnPlugin,
        "spawn",
    ),
    "ddp_cpu+DDPPlugin": (
        lambda: {
            "accelerator": "ddp_cpu",
            "num_processes": 2,
            "plugins": [DDPPlugin(find_unused_parameters=True)],
        },
        DDPPlugin,
        "subprocess",
    ),
    "num_processes+DDPPlugin": (
        lambda: {"num_processes": 2, "plugins": [DDPPlugin()]},
        DDPPlugin,
        "subprocess",
    ),
}


@pytest.mark.standalone
@pytest.mark.timeout(240)
@pytest.mark.parametrize("call", sorted(MISSION))
def test_mission_call_trains_like_hand_written_ddp(
    call: str, shared_dir: Path, seeded: int
) -> None:
    make_flags, plugin_type, launcher = MISSION[call]
    legacy = call == "ddp_cpu"
    warns = (
        pytest.warns(DDPKitDeprecationWarning, match="ddp_cpu")
        if legacy
        else contextlib.nullcontext()
    )
    root = shared_dir / "root"
    with warns:
        trainer = Trainer(
            **make_flags(),
            max_epochs=EPOCHS,
            default_root_dir=root,
            enable_progress_bar=False,
            log_every_n_steps=1,
        )
    assert type(trainer.strategy) is plugin_type
    # A rank the subprocess launcher started plans no launch of its own: it is one rank of a
    # job its parent started.
    started_by_parent = "LOCAL_RANK" in os.environ
    expected = "external" if started_by_parent else launcher
    assert trainer.accelerator_connector.plan.launcher.value == expected
    assert trainer.world_size == 2

    model = Regressor(shared_dir, tag="fit")
    untrained = {k: v.clone() for k, v in net_state(model.state_dict()).items()}
    loader = DataLoader(make_dataset(), batch_size=BATCH, shuffle=True)
    trainer.fit(model, loader)
    if trainer.global_rank != 0:
        return  # rank 1 re-ran this test: its file is written; rank zero checks everything

    ranks = [wait_for(shared_dir / f"fit-rank{r}.pt") for r in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert ranks[0]["pid"] != ranks[1]["pid"]
    if launcher == "subprocess":
        assert ranks[0]["pid"] == os.getpid()  # rank zero is the user's process
    else:
        assert os.getpid() not in {r["pid"] for r in ranks}  # the parent does not train

    # CPU ranks share the cores: ranks × threads ≤ cores (unless the user set the threads).
    if "OMP_NUM_THREADS" not in os.environ:
        cores = len(os.sched_getaffinity(0))
        assert all(r["threads"] == max(1, cores // 2) for r in ranks), [r["threads"] for r in ranks]

    # The loss goes down (rank zero's own shard, first epoch against last).
    losses = torch.tensor(ranks[0]["record"]["losses"]).view(EPOCHS, STEPS_PER_EPOCH)
    first, last = losses[0].mean().item(), losses[-1].mean().item()
    assert last < 0.5 * first, (first, last)

    # The final weights are identical on both ranks and equal the hand-written DDP loop's.
    w0, w1 = (net_state(r["state_dict"]) for r in ranks)
    for name in w0:
        assert torch.equal(w0[name], w1[name]), name
    assert_weights_close(w0, simulate_ddp(epochs=EPOCHS))
    assert not torch.allclose(w0["0.weight"], untrained["0.weight"])

    # The user's model holds them: trained in place (subprocess) or adopted by the parent (spawn).
    for name, value in net_state(model.state_dict()).items():
        assert torch.equal(value, w0[name]), name

    # Counters, metrics and the checkpoint are rank zero's, in this process too.
    assert (trainer.global_step, trainer.current_epoch) == (EPOCHS * STEPS_PER_EPOCH, EPOCHS)
    assert ranks[0]["global_step"] == trainer.global_step
    assert {k: float(v) for k, v in trainer.callback_metrics.items()} == ranks[0][
        "callback_metrics"
    ]
    assert trainer.checkpoint_path is not None
    ckpt = load_checkpoint(trainer.checkpoint_path)
    # Lightning's meaning: "epoch" is the epoch that wrote it (0-based).
    assert (ckpt["global_step"], ckpt["epoch"]) == (trainer.global_step, EPOCHS - 1)
    for name, value in net_state(ckpt["state_dict"]).items():
        assert torch.equal(value, w0[name]), name
    last_step = EPOCHS * STEPS_PER_EPOCH
    assert files_under(root) == [
        f"checkpoints/epoch={EPOCHS - 1}-step={last_step}.ckpt",
        "metrics.csv",
    ]

    # Each rank got a disjoint shard, reshuffled every epoch, covering the data set.
    seen = [{int(e): v for e, v in r["record"]["indices"].items()} for r in ranks]
    for epoch in range(EPOCHS):
        shard0, shard1 = seen[0][epoch], seen[1][epoch]
        assert set(shard0).isdisjoint(shard1)
        assert sorted(shard0 + shard1) == list(range(N_SAMPLES))
        assert [shard0, shard1] == shard_indices(N_SAMPLES, 2, epoch)
    assert seen[0][0] != seen[0][1]

    # sync_dist metrics are equal on all ranks; the unsynced one shows each rank's own value.
    m0, m1 = (r["callback_metrics"] for r in ranks)
    for name in ("train_loss_epoch", "train_loss_step", "rank_mean", "rank_max"):
        assert m0[name] == m1[name], name
    assert (m0["rank_mean"], m0["rank_max"]) == (0.5, 1.0)
    assert (m0["rank_local"], m1["rank_local"]) == (0.0, 1.0)


# -- accumulation, a second fit, resume -------------------------------------------------------


@pytest.mark.standalone
@pytest.mark.timeout(240)
def test_accumulation_skips_the_allreduce_and_matches_the_large_batch(
    shared_dir: Path, seeded: int
) -> None:
    """Half batches accumulated twice under ``no_sync`` give the large-batch weights; a second
    ``fit`` on the same trainer runs on the same subprocess ranks."""
    plugin = CountingDDPPlugin()
    trainer = Trainer(
        accelerator="cpu",
        devices=2,
        strategy=plugin,
        max_epochs=EPOCHS,
        accumulate_grad_batches=2,
        default_root_dir=shared_dir / "root",
        enable_progress_bar=False,
        enable_checkpointing=False,
        log_every_n_steps=1,
    )
    half = DataLoader(make_dataset(), batch_size=BATCH // 2, shuffle=True)
    trainer.fit(Regressor(shared_dir, tag="accumulate"), half)
    trainer.fit(Regressor(shared_dir, tag="again"), half)
    if trainer.global_rank != 0:
        return

    ranks = [wait_for(shared_dir / f"accumulate-rank{r}.pt") for r in (0, 1)]
    steps = EPOCHS * STEPS_PER_EPOCH  # as many optimizer steps as with full batches
    for r in ranks:
        assert len(r["record"]["losses"]) == 2 * steps  # two micro-batches per step
        assert r["global_step"] == steps
        assert r["allreduces"] == steps  # the accumulation steps ran under no_sync
    w0, w1 = (net_state(r["state_dict"]) for r in ranks)
    for name in w0:
        assert torch.equal(w0[name], w1[name]), name
    assert_weights_close(w0, simulate_ddp(epochs=EPOCHS, batch_size=BATCH))
    small_steps = simulate_ddp(epochs=EPOCHS, batch_size=BATCH // 2)
    assert not torch.allclose(w0["0.weight"], small_steps["0.weight"], atol=1e-4)

    # The second fit: same ranks (rank 1 was not started again); as in Lightning, the Trainer
    # has reached max_epochs already, so it continues its counters and trains nothing more.
    again = [wait_for(shared_dir / f"again-rank{r}.pt") for r in (0, 1)]
    assert [r["pid"] for r in again] == [r["pid"] for r in ranks]
    assert [r["global_step"] for r in again] == [steps, steps]
    assert [r["record"]["steps"] for r in again] == [[], []]
    assert trainer.global_step == steps


@pytest.mark.standalone
@pytest.mark.timeout(240)
def test_resume_continues_from_the_saved_step(shared_dir: Path, seeded: int) -> None:
    """A new run resumed from the first run's checkpoint (model, optimizer momentum, counters)
    ends where an uninterrupted run ends."""
    loader = DataLoader(make_dataset(), batch_size=BATCH, shuffle=True)
    common: dict[str, Any] = {
        "accelerator": "cpu",
        "devices": 2,
        "strategy": "ddp_spawn",
        "enable_progress_bar": False,
        "log_every_n_steps": 1,
    }
    first = Trainer(**common, max_epochs=1, default_root_dir=shared_dir / "first")
    first.fit(Regressor(shared_dir, tag="first"), loader)
    assert first.checkpoint_path is not None
    saved = load_checkpoint(first.checkpoint_path)
    assert (saved["epoch"], saved["global_step"]) == (0, STEPS_PER_EPOCH)
    assert read_position(saved)["epochs_completed"] == 1
    assert saved["optimizer_states"][0]["state"]  # the momentum buffers travel with it
    assert_weights_close(net_state(saved["state_dict"]), simulate_ddp(epochs=1))

    second = Trainer(**common, max_epochs=EPOCHS, default_root_dir=shared_dir / "second")
    model = Regressor(shared_dir, tag="resumed")
    second.fit(model, loader, ckpt_path=first.checkpoint_path)

    ranks = [wait_for(shared_dir / f"resumed-rank{r}.pt") for r in (0, 1)]
    for r in ranks:
        assert r["record"]["steps"][0] == STEPS_PER_EPOCH  # not from zero
        assert r["record"]["epochs"][0] == 1
        assert len(r["record"]["losses"]) == (EPOCHS - 1) * STEPS_PER_EPOCH
    assert (second.global_step, second.current_epoch) == (EPOCHS * STEPS_PER_EPOCH, EPOCHS)
    w0, w1 = (net_state(r["state_dict"]) for r in ranks)
    for name in w0:
        assert torch.equal(w0[name], w1[name]), name
    assert_weights_close(w0, simulate_ddp(epochs=EPOCHS))  # the uninterrupted run
    assert_weights_close(net_state(model.state_dict()), w0)
