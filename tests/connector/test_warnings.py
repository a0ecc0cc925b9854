"""Legacy warnings: once, on rank zero, pointing at the user's Trainer(...) line."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable

import pytest

from ddpkit import Trainer
from ddpkit.errors import DDPKitDeprecationWarning

Machine = Callable[..., None]


def test_warning_points_at_the_users_line(machine: Machine) -> None:
    with pytest.warns(DDPKitDeprecationWarning) as record:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        Trainer(accelerator="ddp_cpu", num_processes=2)
    assert len(record) == 1
    assert record[0].filename == __file__
    assert record[0].lineno == line


def test_deprecation_warning_is_shown_by_default() -> None:
    # FutureWarning is the category Python shows to end users without any filter.
    assert issubclass(DDPKitDeprecationWarning, FutureWarning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.warn("x", DDPKitDeprecationWarning, stacklevel=1)
    assert len(caught) == 1


@pytest.mark.parametrize("variable", ["LOCAL_RANK", "RANK", "SLURM_PROCID", "NODE_RANK"])
def test_no_warning_off_rank_zero(machine: Machine, variable: str) -> None:
    machine(env={variable: "1"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Trainer(accelerator="ddp_cpu", num_processes=2, num_nodes=2)


def test_replace_sampler_ddp_is_legacy(machine: Machine) -> None:
    with pytest.warns(DDPKitDeprecationWarning, match=r"use_distributed_sampler=False"):
        trainer = Trainer(replace_sampler_ddp=False)
    assert trainer.use_distributed_sampler is False
