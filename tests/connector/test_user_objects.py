"""A user's own objects in the Trainer's call: one whose ``repr`` raises is named by its type in
the message (ddpkit's own message crashed on it), and a training type subclass whose ``name``
claims a launch its class cannot do is refused when the Trainer is built (it was a RuntimeError
from the launcher factory). The loop keywords issue 22 names are refused with the call too."""

from __future__ import annotations

from typing import Any

import pytest

from ddpkit import MisconfigurationError, Trainer
from ddpkit.plugins.training_type._base import TrainingTypePlugin


class Opaque:
    def __repr__(self) -> str:
        raise RuntimeError("a repr that raises")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": Opaque()}, r"^Trainer\(strategy=<Opaque object>\): strategy must be"),
        ({"devices": Opaque()}, r"^Trainer\(devices=<Opaque object>\)"),
        ({"plugins": [Opaque()]}, r"^Trainer\(plugins=\[<Opaque object>\]\)"),
        ({"callbacks": [Opaque()]}, r"^Trainer\(callbacks=\[<Opaque object>\]\): Opaque is not"),
        ({"logger": Opaque()}, r"^Trainer\(logger=<Opaque object>\): Opaque is not a logger"),
        ({"max_epochs": Opaque()}, r"^Trainer\(max_epochs=<Opaque object>\): got Opaque"),
    ],
)
def test_an_object_whose_repr_raises_is_named_by_its_type(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(MisconfigurationError, match=message):
        Trainer(**kwargs)


@pytest.mark.parametrize("claimed", ["ddp", "ddp_spawn", "my_plugin"])
def test_a_training_type_that_claims_a_launch_it_cannot_do_is_refused(claimed: str) -> None:
    class MyTT(TrainingTypePlugin):
        name = claimed

    for flags in ({}, {"devices": 2}):
        with pytest.raises(
            MisconfigurationError,
            match=rf"strategy=MyTT\(\) says name = '{claimed}', but MyTT is a direct "
            rf"TrainingTypePlugin subclass, which ddpkit runs as 'custom'.*Fix: subclass DDPPlugin",
        ):
            Trainer(strategy=MyTT(), **flags)


def test_a_direct_subclass_runs_in_this_process() -> None:
    class MyTT(TrainingTypePlugin):
        pass

    trainer = Trainer(strategy=MyTT())
    assert trainer.strategy.__class__ is MyTT and trainer.world_size == 1
    assert trainer.accelerator_connector.plan.launcher.value == "none"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"accumulate_grad_batches": 0}, r"accumulate_grad_batches=0\): must be ≥ 1.*Fix"),
        ({"accumulate_grad_batches": {}}, r"accumulate_grad_batches=\{\}\): an empty schedule"),
        ({"max_steps": "x"}, r"max_steps='x'\): got str; pass an int ≥ -1.*Fix"),
        ({"profiler": 3}, r"profiler=3\): ddpkit's loop has no profiler\. Fix"),
    ],
)
def test_the_loop_values_issue_22_lists_are_refused_with_the_call(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(MisconfigurationError, match=rf"^Trainer\({message}"):
        Trainer(**kwargs)
