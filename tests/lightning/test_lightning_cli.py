"""LightningCLI and ddpkit.lightning.Trainer: Lightning 2.x's own CLI sees the 1.x keywords with
their types (from the Trainer's signature), and ddpkit.lightning.LightningCLI runs a 1.x script's
CLI as 1.4 did (fit in the constructor) or as 1.5–1.9 did (subcommands). In-process, one CPU; the
two-rank runs are tests/lightning/projects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")
pytest.importorskip("jsonargparse", reason="the `lightning` extra is not installed")

import torch  # noqa: E402
from pytorch_lightning.cli import LightningCLI as LightningsCLI  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from ddpkit import DDPKitDeprecationWarning  # noqa: E402
from ddpkit.lightning import LightningCLI, SupervisedDDPStrategy, Trainer  # noqa: E402


class Model(pl.LightningModule):
    def __init__(self, hidden: int = 4) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3, hidden)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).pow(2).mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(torch.randn(8, 3)), batch_size=4)


@pytest.fixture(autouse=True)
def _seed_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """seed_everything (Lightning's CLI calls it) exports PL_GLOBAL_SEED and PL_SEED_WORKERS:
    set here first, so that monkeypatch takes them away again."""
    for name in ("PL_GLOBAL_SEED", "PL_SEED_WORKERS"):
        monkeypatch.setenv(name, "0")
        monkeypatch.delenv(name)


def quiet(root: Path) -> list[str]:
    return [f"--trainer.default_root_dir={root}", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false"]  # fmt: skip


def test_lightnings_own_cli_takes_the_1x_keywords_of_the_trainer(tmp_path: Path) -> None:
    args = [
        "--trainer.num_processes=2",
        "--trainer.plugins=ddp_find_unused_parameters_false",
        "--trainer.weights_summary=null",
        "--trainer.max_epochs=3",
        *quiet(tmp_path),
    ]
    with pytest.warns(DDPKitDeprecationWarning) as record:
        cli = LightningsCLI(Model, trainer_class=Trainer, run=False, args=args)
    said = [str(w.message) for w in record]
    assert any("1.x device flags" in m for m in said)
    assert any(m.startswith("Trainer(weights_summary=None)") for m in said)
    trainer = cli.trainer
    assert isinstance(trainer, Trainer) and trainer.max_epochs == 3
    assert trainer.plan is not None and trainer.plan.world_size == 2
    assert type(trainer.strategy) is SupervisedDDPStrategy
    assert trainer.strategy._ddp_kwargs == {}  # find_unused_parameters False: DDP's default


def test_the_cli_types_the_1x_keywords(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):  # jsonargparse: not an int
        LightningsCLI(Model, trainer_class=Trainer, run=False,
                      args=["--trainer.num_processes=two", *quiet(tmp_path)])  # fmt: skip


def test_a_1_4_cli_fits_in_the_constructor(tmp_path: Path) -> None:
    args = ["--trainer.max_steps=2", "--model.hidden=5", *quiet(tmp_path)]
    with pytest.warns(DDPKitDeprecationWarning, match=r"LightningCLI\(save_config_overwrite="):
        cli = LightningCLI(Model, seed_everything_default=1234, save_config_overwrite=True,
                           args=args)  # fmt: skip
    assert isinstance(cli.trainer, Trainer)
    assert cli.trainer.global_step == 2 and cli.model.layer.out_features == 5
    assert cli.fit_kwargs == {"model": cli.model}
    assert (Path(cli.trainer.log_dir) / "config.yaml").is_file()


def test_a_subcommand_runs_as_1_5_did(tmp_path: Path) -> None:
    cli = LightningCLI(Model, args=["fit", "--trainer.max_steps=1", *quiet(tmp_path)])
    assert cli.subcommand == "fit" and cli.trainer.global_step == 1
    assert not hasattr(cli, "fit_kwargs")  # 1.4's path did not run


def test_run_false_only_builds(tmp_path: Path) -> None:
    cli = LightningCLI(Model, run=False, args=["--trainer.max_steps=1", *quiet(tmp_path)])
    assert cli.trainer.global_step == 0
