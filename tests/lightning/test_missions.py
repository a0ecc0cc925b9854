"""The four mission calls of Lightning 1.x, run by ddpkit.lightning.Trainer on real Lightning 2.x
with two real CPU ranks, against pytorch_lightning.Trainer in the modern spelling.

Each run is ``scripts/lit_run.py`` in a process of its own (the subprocess launcher re-runs the
command line for rank 1, so it cannot run inside this pytest process). The references are run
once per module: Lightning's ``strategy="ddp"`` and ``strategy="ddp_spawn"``.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning_scripts import SCRIPTS, run_lightning_script

SCRIPT = SCRIPTS / "lit_run.py"
MISSION = {  # call → (launcher, the reference's strategy)
    "ddp_cpu": ("spawn", "ddp_spawn"),
    "ddp_cpu+DDPSpawnPlugin": ("spawn", "ddp_spawn"),
    "ddp_cpu+DDPPlugin": ("subprocess", "ddp"),
    "num_processes+DDPPlugin": ("subprocess", "ddp"),
}


def _lit_run() -> Any:
    """The run script as a module (its mission_flags)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import lit_run
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return lit_run


# Imported at collection, as the suite's other Lightning tests do: Lightning's import exports
# PYTORCH_NVML_BASED_CUDA_CHECK, which the root conftest would blame on the first test.
_lit_run()


def run_script(out: Path, *args: str) -> dict[str, Any]:
    result = run_lightning_script(SCRIPT.name, out, *args)
    result["log_versions"] = [p.parent.name for p in sorted(out.glob("logs/version_*/metrics.csv"))]
    result["hooks"] = {
        (stage, rank): json.loads((out / f"hooks-{stage}-rank{rank}.json").read_text())
        for stage in ("fit", "test")
        for rank in (0, 1)
    }
    return result


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    cache: dict[str, dict[str, Any]] = {}

    class Lazy(dict):  # type: ignore[type-arg]
        def __missing__(self, strategy: str) -> dict[str, Any]:
            out = tmp_path_factory.mktemp(f"reference-{strategy}") / "run"
            cache[strategy] = run_script(out, "--trainer", "lightning", "--strategy", strategy)
            return cache[strategy]

    return Lazy()


#: Calls whose Trainer is the same Lightning run as another call's (test_..._same_run below): they
#: run end to end supervised (the default), and their partner unsupervised (with
#: DDPKIT_FULL_SUITE=1), so that each of the four calls runs end to end once and each launcher
#: runs supervised and not.
SAME_RUN_AS = {"ddp_cpu+DDPSpawnPlugin": "ddp_cpu", "ddp_cpu+DDPPlugin": "num_processes+DDPPlugin"}
#: Unsupervised, ddpkit.lightning.Trainer is Lightning's own run: test_device_flags.py's
#: test_the_warned_lightning_call_builds_the_same_objects shows (in-process) that every mission
#: call builds the strategy, launcher, environment and precision pytorch_lightning.Trainer builds,
#: and the references run Lightning's own launchers end to end. The supervised runs, with their
#: partners above, carry the four calls end to end in every run of the suite.
UNSUPERVISED = pytest.mark.full_suite(
    "the unsupervised run is Lightning's own (the references run it; the objects are checked "
    "in-process by test_device_flags.py); the supervised partner run is the same call"
)


@pytest.mark.xdist_group("mission-references")
@pytest.mark.timeout(420)
@pytest.mark.parametrize(
    ("call", "supervise"),
    [
        # By default ddpkit supervises the ranks of the plan it resolved (ddpkit's launchers
        # under Lightning's loop); supervise=False runs Lightning's own DDP. The same training.
        *(
            pytest.param(call, "false", marks=UNSUPERVISED)
            for call in sorted(MISSION)
            if call not in SAME_RUN_AS
        ),
        *((call, "default") for call in sorted(SAME_RUN_AS)),
    ],
)
def test_mission_call_runs_on_lightning_like_the_modern_spelling(
    call: str, supervise: str, tmp_path: Path, references: dict[str, dict[str, Any]]
) -> None:
    launcher, strategy = MISSION[call]
    out = tmp_path / "run"
    ours = run_script(out, "--trainer", "ddpkit", "--call", call, "--supervise", supervise)
    reference = references[strategy]
    supervised = supervise == "default"
    assert ours["strategy"] == ("SupervisedDDPStrategy" if supervised else "DDPStrategy")

    # One warning for the device flags, naming a Lightning 2.x call with this launcher; one per
    # 1.x keyword of the script.
    messages = json.loads((out / "warnings.json").read_text())
    lightning_call = (out / "lightning_call.txt").read_text()
    device = [m for m in messages if "1.x device flags" in m]
    assert len(device) == 1
    assert f"The same run, in Lightning 2.x's spelling: {lightning_call}" in device[0]
    assert lightning_call.startswith("Trainer(accelerator='cpu', devices=2, strategy=")
    assert ("spawn" in lightning_call) == (launcher == "spawn")
    assert sum("progress_bar_refresh_rate=0" in m for m in messages) == 1
    assert sum("weights_summary=None" in m for m in messages) == 1

    # The same training: weights, early-stopping epoch, what test() returned.
    assert sorted(ours["state"]) == sorted(reference["state"])
    for name, value in reference["state"].items():
        torch.testing.assert_close(ours["state"][name], value, rtol=1e-5, atol=1e-6, msg=name)
    # Where the fit ended, as rank zero saw it — and as the Trainer fit was called on says: under
    # spawn, ddpkit's launcher (supervised) brings rank zero's loop back, so that a second fit
    # continues; Lightning's own spawn leaves that Trainer's counters at 0 (docs/flags.md).
    rank_zero = reference["hooks"]["fit", 0]
    ended = rank_zero["current_epoch"], rank_zero["global_step"]
    fit0 = ours["hooks"]["fit", 0]
    assert (fit0["current_epoch"], fit0["global_step"]) == ended
    stale = launcher == "spawn" and not supervised
    assert (ours["current_epoch"], ours["global_step"]) == ((0, 0) if stale else ended)
    lightning_stale = strategy == "ddp_spawn"
    assert (reference["current_epoch"], reference["global_step"]) == (
        (0, 0) if lightning_stale else ended
    )
    assert ours["current_epoch"] < 6  # early stopping ended it, on both ranks alike
    assert len(ours["tested"]) == 1 and set(ours["tested"][0]) == {"test_loss"}
    assert ours["tested"][0]["test_loss"] == pytest.approx(reference["tested"][0]["test_loss"])
    assert ours["tested"][0]["test_loss"] == pytest.approx(ours["callback_metrics"]["test_loss"])

    # Callbacks ran on every rank, each in a process of its own.
    fit0, fit1 = ours["hooks"]["fit", 0], ours["hooks"]["fit", 1]
    assert (fit0["rank"], fit1["rank"], fit0["world_size"]) == (0, 1, 2)
    assert fit0["pid"] != fit1["pid"]
    assert fit0["seen"] == fit1["seen"] == reference["hooks"]["fit", 0]["seen"]
    assert fit0["seen"][0] == "on_fit_start@0"
    assert fit0["stopped_epoch"] == fit1["stopped_epoch"] > 0
    test0, test1 = ours["hooks"]["test", 0], ours["hooks"]["test", 1]
    # test() runs on the Trainer's counters: the fit's last epoch, or 0 where they stayed.
    assert test0["seen"] == test1["seen"] == [f"on_test_end@{ours['current_epoch']}"]
    assert reference["hooks"]["test", 0]["seen"] == [f"on_test_end@{reference['current_epoch']}"]
    if launcher == "subprocess":
        assert fit0["pid"] == ours["pid"]  # rank 0 is the script's own process
    else:
        assert ours["pid"] not in {fit0["pid"], fit1["pid"]}  # the parent only waits

    # The best checkpoint, metrics.csv, and load_from_checkpoint.
    best = Path(ours["best_model_path"])
    assert best.is_file() and best.parent == out / "ckpt"
    assert best.name == Path(reference["best_model_path"]).name
    # Lightning writes one version per launch (under spawn: fit's, then test's), as it does for
    # the reference.
    tables = sorted(out.glob("logs/version_*/metrics.csv"))
    assert [p.parent.name for p in tables] == reference["log_versions"]
    columns: set[str] = set()
    for table in tables:
        with open(table) as fh:
            columns |= set(next(csv.reader(fh)))
    assert {"val_loss", "train_loss_epoch", "test_loss", "epoch", "step"} <= columns
    assert ours["loaded_hparams"] == {"hidden": 16, "lr": 0.05}
    saved = torch.load(best, weights_only=False)["state_dict"]
    for name, value in saved.items():
        assert torch.equal(ours["loaded_state"][name], value), name


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("call", "partner"), sorted(SAME_RUN_AS.items()))
def test_a_call_run_only_supervised_builds_the_same_run_as_its_partner(
    call: str, partner: str, tmp_path: Path
) -> None:
    """The same Lightning call, strategy (launcher, DDP options), environment and devices: its
    unsupervised run would be its partner's again (two runs of ~20 s)."""
    import warnings

    from ddpkit.lightning import Trainer

    lit_run = _lit_run()

    def built(name: str) -> tuple[Any, ...]:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            flags = lit_run.mission_flags(name)
            trainer = Trainer(**flags, supervise=False, default_root_dir=tmp_path / name)
        strategy = trainer.strategy
        device = [str(w.message) for w in seen if "1.x device flags" in str(w.message)]
        return (
            trainer.lightning_call,
            type(strategy).__name__,
            strategy._start_method,
            strategy._ddp_kwargs,
            type(strategy.cluster_environment).__name__,
            strategy.num_processes,
            [str(d) for d in strategy.parallel_devices],
            len(device),  # its text differs (the bare ddp_cpu's says its default is ambiguous):
        )  # the supervised run of `call` checks it end to end

    assert built(call) == built(partner)
