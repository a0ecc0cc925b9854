"""Every shape ``configure_optimizers`` may return, normalized."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ddpkit import MisconfigurationError
from ddpkit.trainer._optim import SchedulerConfig, parse_optimizers

PARAMS = [torch.nn.Parameter(torch.zeros(1))]


def sgd() -> torch.optim.Optimizer:
    return torch.optim.SGD(PARAMS, lr=0.1)


def step_lr(opt: torch.optim.Optimizer) -> torch.optim.lr_scheduler.StepLR:
    return torch.optim.lr_scheduler.StepLR(opt, step_size=1)


def test_one_optimizer() -> None:
    opt = sgd()
    assert parse_optimizers(opt) == ([opt], [])


def test_a_list_of_optimizers() -> None:
    a, b = sgd(), sgd()
    assert parse_optimizers([a, b]) == ([a, b], [])
    assert parse_optimizers((a,)) == ([a], [])


def test_optimizers_and_schedulers() -> None:
    opt = sgd()
    sched = step_lr(opt)
    assert parse_optimizers(([opt], [sched])) == ([opt], [SchedulerConfig(sched)])
    assert parse_optimizers([[opt], sched]) == ([opt], [SchedulerConfig(sched)])


def test_a_dict_with_a_scheduler_config() -> None:
    opt = sgd()
    sched = step_lr(opt)
    returned = {
        "optimizer": opt,
        "lr_scheduler": {"scheduler": sched, "interval": "step", "frequency": 3},
    }
    assert parse_optimizers(returned) == ([opt], [SchedulerConfig(sched, "step", 3, None)])


def test_the_dicts_monitor_reaches_its_scheduler() -> None:
    opt = sgd()
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
    _, [config] = parse_optimizers({"optimizer": opt, "lr_scheduler": plateau, "monitor": "val"})
    assert config.monitor == "val"
    _, [own] = parse_optimizers(
        {"optimizer": opt, "lr_scheduler": {"scheduler": plateau, "monitor": "a"}, "monitor": "b"}
    )
    assert own.monitor == "a"


def test_a_dict_without_a_scheduler_and_a_list_of_dicts() -> None:
    a, b = sgd(), sgd()
    sched = step_lr(b)
    assert parse_optimizers({"optimizer": a}) == ([a], [])
    assert parse_optimizers([{"optimizer": a}, {"optimizer": b, "lr_scheduler": sched}]) == (
        [a, b],
        [SchedulerConfig(sched)],
    )


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (None, r"returned NoneType; return an optimizer"),
        ("adam", r"returned str"),
        ([], r"returned list"),
        ({"lr": 0.1}, r"a dict without an 'optimizer' key"),
    ],
)
def test_what_is_not_an_optimizer(returned: Any, message: str) -> None:
    with pytest.raises(MisconfigurationError, match=message):
        parse_optimizers(returned)


def test_a_scheduler_config_needs_a_scheduler_and_a_known_interval() -> None:
    opt = sgd()
    with pytest.raises(MisconfigurationError, match=r"needs a 'scheduler' key"):
        parse_optimizers({"optimizer": opt, "lr_scheduler": {"interval": "step"}})
    with pytest.raises(MisconfigurationError, match=r"interval='batch'; choose 'epoch' or 'step'"):
        parse_optimizers(
            {"optimizer": opt, "lr_scheduler": {"scheduler": step_lr(opt), "interval": "batch"}}
        )
