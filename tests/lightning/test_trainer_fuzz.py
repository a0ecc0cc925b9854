"""A property of ``ddpkit.lightning.Trainer`` over 1.x device flags, Lightning's own objects mixed
in, and the 1.x keywords of the shared table at any value: every call that ddpkit resolves builds a
Trainer whose objects are the plan's, or raises a MisconfigurationError that quotes the call and
names the fix. Never another exception (a raw ``KeyError``, ``ValueError``, ``TypeError`` from
Lightning or ddpkit). No process starts: building a Trainer launches nothing."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

import torch  # noqa: E402
from hypothesis import HealthCheck, event, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from lightning_fabric.plugins.environments import (  # noqa: E402
    LightningEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)
from pytorch_lightning.plugins import MixedPrecision  # noqa: E402
from pytorch_lightning.strategies import DDPStrategy  # noqa: E402

from ddpkit._compat_1x.keywords import ROWS  # noqa: E402
from ddpkit.errors import MisconfigurationError  # noqa: E402
from ddpkit.lightning import DDPPlugin, DDPSpawnPlugin, Trainer  # noqa: E402
from ddpkit.plugins import LocalEnvironment  # noqa: E402

pytestmark = pytest.mark.timeout(300)

JUNK = st.sampled_from(["", "x", "2", "1.5", "-1", "auto", "0,1", None, object()])
NUMBERS = st.one_of(st.integers(-2, 3), st.floats(allow_nan=True), st.booleans())
NAMES = st.sampled_from([
    None, "auto", "cpu", "gpu", "ddp_cpu", "ddp", "ddp_spawn", "ddp_cpu_spawn", "ddp_cpuu",
    "ddp_find_unused_parameters_false", "tpu", "dp", "ddp2", "horovod", "fsdp", "CPU", "",
])  # fmt: skip
LIGHTNING_OBJECTS = st.sampled_from([
    LightningEnvironment(), SLURMEnvironment(), TorchElasticEnvironment(), DDPStrategy(),
    MixedPrecision("bf16-mixed", "cpu"), LocalEnvironment({}),
])  # fmt: skip
PLUGINS = st.one_of(
    NAMES.filter(lambda n: n is not None),
    LIGHTNING_OBJECTS,
    st.builds(DDPPlugin, find_unused_parameters=st.booleans()),
    st.builds(DDPSpawnPlugin, find_unused_parameters=st.booleans()),
)
#: A value of a 1.x keyword: its own 1.x values (the row's example, default, no-ops) or junk.
ONE_X = {
    name: st.one_of(
        st.sampled_from([row.example, *([row.default] if row.is_1x else []), *row.noop]),
        st.one_of(JUNK, NUMBERS),
    )
    for name, row in ROWS.items()
}


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # A 1.x device call (ddpkit resolves it, whatever else is mixed in): a 1.x device flag, a
    # 1.x training type as the accelerator, or a ddpkit plugin.
    first = draw(st.sampled_from(["num_processes", "gpus", "accelerator", "plugins"]))
    if first == "accelerator":
        out[first] = draw(st.sampled_from(["ddp_cpu", "ddp", "ddp_spawn", "ddp_cpu_spawn"]))
    elif first == "plugins":
        out[first] = [draw(st.builds(DDPPlugin, find_unused_parameters=st.booleans()))]
    else:  # mostly what users write, now and then junk
        out[first] = draw(
            st.one_of(st.sampled_from([1, 2, 2]), NUMBERS, JUNK.filter(lambda v: v is not None))
        )
    for name in ("accelerator", "devices", "strategy", "num_nodes", "precision"):
        if name not in out and draw(st.integers(0, 3)) == 0:
            out[name] = draw(st.one_of(NAMES, NUMBERS, LIGHTNING_OBJECTS))
    if draw(st.booleans()):
        out["plugins"] = [*out.get("plugins", []), *draw(st.lists(PLUGINS, max_size=2))]
    for name in draw(st.lists(st.sampled_from(sorted(ONE_X)), max_size=3, unique=True)):
        out[name] = draw(ONE_X[name])
    return out


def _explain(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kwargs=calls())
# Found by this test: Lightning's own message for a kept keyword's bad value, and a progress bar
# added for process_position beside enable_progress_bar=False.
@example(kwargs={"accelerator": "ddp_cpu", "profiler": ""})
@example(kwargs={"accelerator": "ddp_cpu", "max_steps": "x"})
@example(kwargs={"accelerator": "ddp_cpu", "process_position": 1})
def test_a_trainer_or_a_clear_error(kwargs: dict[str, Any]) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer = Trainer(logger=False, enable_progress_bar=False, **kwargs)
    except MisconfigurationError as err:
        event("refused")
        message = str(err)
        assert message.startswith(("Trainer(", "SupervisedDDPStrategy(")), message
        assert any(
            marker in message for marker in ("Fix", "Choose one of", "took", "did you mean")
        ), message
        return
    event(f"built {type(trainer.strategy).__name__}")
    if trainer.plan is not None:  # the plan is what runs
        assert trainer.world_size == trainer.plan.world_size, _explain(kwargs)
        assert trainer.num_nodes == trainer.plan.num_nodes.value
        gpu = trainer.strategy.root_device.type == "cuda"
        assert (trainer.plan.accelerator.value == "gpu") == gpu
    assert isinstance(trainer.strategy.root_device, torch.device)
