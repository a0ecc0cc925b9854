"""``ddpkit.lightning.Trainer(max_restarts=N)``: refused before any rank starts unless ddpkit's
launchers start the ranks; every Trainer of ddpkit's carries the restart callback and connector
(a restarted torchrun worker resumes too). The restarts themselves: tests/integration."""

from __future__ import annotations

import pytest

pytest.importorskip("pytorch_lightning")

from ddpkit.errors import MisconfigurationError
from ddpkit.lightning import SupervisedDDPStrategy, Trainer
from ddpkit.lightning._restart import RestartConnector, RestartState


def test_restarts_on_lightnings_own_launch_are_refused_naming_supervision() -> None:
    with pytest.raises(
        MisconfigurationError,
        match=r"^Trainer\(max_restarts=1\): restarts need ddpkit's launchers, .*supervise=True",
    ):
        Trainer(max_restarts=1, accelerator="cpu", devices=2, strategy="ddp_spawn", supervise=False)


@pytest.mark.parametrize("value", [-1, "1", 1.0])
def test_a_bad_count_is_refused(value: object) -> None:
    with pytest.raises(MisconfigurationError, match=r"max_restarts=.*: pass an int ≥ 0"):
        Trainer(max_restarts=value, accelerator="cpu", devices=2, strategy="ddp", supervise=True)
    with pytest.raises(MisconfigurationError, match=r"^SupervisedDDPStrategy\(max_restarts="):
        SupervisedDDPStrategy(max_restarts=value)  # type: ignore[arg-type]


def test_a_supervised_trainer_takes_the_restarts_and_every_trainer_the_restart_state() -> None:
    trainer = Trainer(
        max_restarts=2,
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        supervise=True,
        enable_checkpointing=False,
    )
    assert isinstance(trainer.strategy, SupervisedDDPStrategy)
    assert trainer.strategy.max_restarts == 2
    first = trainer.callbacks[0]
    assert isinstance(first, RestartState) and first.kept  # no ModelCheckpoint: ddpkit's own
    assert isinstance(trainer._checkpoint_connector, RestartConnector)
    plain = Trainer(accelerator="cpu", devices=1)
    assert isinstance(plain.callbacks[0], RestartState) and not plain.callbacks[0].kept
