"""Every Trainer keyword of Lightning 1.0 … 1.9, at that release's own default, builds
``ddpkit.lightning.Trainer``: alone, and all of them at once (what 1.x's ``from_argparse_args``
passed). A default that asks for nothing is accepted silently or with a deprecation, and the
Trainer is the same as ``Trainer()``. The signatures are data (``data/trainer_1x_signatures.json``,
read from the released wheels), and the shared keyword table is held to them."""

from __future__ import annotations

import ast
import inspect
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

from ddpkit import DDPKitDeprecationWarning, DDPKitWarning  # noqa: E402
from ddpkit._compat_1x.keywords import DEVICE_ROWS, ROWS, is_value  # noqa: E402
from ddpkit.lightning import Trainer  # noqa: E402

DATA = json.loads((Path(__file__).parent / "data" / "trainer_1x_signatures.json").read_text())
VERSIONS: dict[str, dict[str, Any]] = {
    version: {name: ast.literal_eval(p["default"]) for name, p in signature.items()}
    for version, signature in DATA["versions"].items()
}
LIGHTNING_2 = set(inspect.signature(pl.Trainer.__init__).parameters) - {"self"}
TABLE = {**ROWS, **DEVICE_ROWS}


def build(**kwargs: Any) -> tuple[Trainer, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = Trainer(**kwargs)
    return trainer, [w for w in caught if issubclass(w.category, DDPKitWarning)]


def effect(trainer: pl.Trainer) -> tuple[Any, ...]:
    """What a Trainer does, as far as a 1.x keyword could change it."""
    return (
        type(trainer.strategy).__name__,
        type(trainer.accelerator).__name__,
        trainer.num_devices,
        trainer.precision,
        sorted(type(c).__name__ for c in trainer.callbacks),
        [type(logger).__name__ for logger in trainer.loggers],
        type(trainer.profiler).__name__,
        trainer._detect_anomaly,
        trainer.accumulate_grad_batches,
        trainer.reload_dataloaders_every_n_epochs,
        trainer._accelerator_connector.use_distributed_sampler,
        trainer.max_steps,
    )


PAIRS = sorted({(v, name) for v, sig in VERSIONS.items() for name in sig})


@pytest.mark.parametrize(("version", "name"), PAIRS, ids=[f"{v}-{n}" for v, n in PAIRS])
def test_each_keyword_at_its_1x_default_builds(version: str, name: str) -> None:
    value = VERSIONS[version][name]
    trainer, caught = build(**{name: value})
    # Only deprecations, each saying the value asks for nothing (no 1.x keyword maps here).
    assert all(w.category is DDPKitDeprecationWarning for w in caught), [
        str(w.message) for w in caught
    ]
    if name in TABLE:
        # "drop it"; a 1.x device flag is named in the 2.x spelling of the same (one CPU process)
        said = [str(w.message) for w in caught]
        assert all("Fix: drop it." in m or "devices=1)." in m for m in said), said
        assert effect(trainer) == effect(build()[0]), (name, value)


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_every_keyword_of_a_release_at_its_defaults_at_once(version: str) -> None:
    trainer, caught = build(**VERSIONS[version])
    assert all(w.category is DDPKitDeprecationWarning for w in caught), [
        str(w.message) for w in caught
    ]
    assert type(trainer.strategy).__name__ == "SingleDeviceStrategy"
    assert trainer.num_devices == 1 and trainer.plan is not None


def test_the_last_1x_defaults_are_silent() -> None:
    _, caught = build(**{k: v for k, v in VERSIONS["1.9.0"].items()})
    assert caught == []


def test_the_table_holds_every_1x_keyword_lightning_2_removed() -> None:
    removed = {name for sig in VERSIONS.values() for name in sig} - LIGHTNING_2
    assert removed == {name for name, row in TABLE.items() if row.is_1x and not row.kept}


@pytest.mark.parametrize("name", sorted(n for n, r in TABLE.items() if r.is_1x and not r.kept))
def test_a_row_says_when_its_keyword_went_and_what_its_defaults_were(name: str) -> None:
    row = TABLE[name]
    had = [v for v in sorted(VERSIONS) if name in VERSIONS[v]]
    gone = [v for v in sorted(VERSIONS) if v > had[-1]]
    assert row.removed == (gone[0][:3] if gone else "2.0")
    assert is_value(VERSIONS[had[-1]][name], (row.default,))  # the last 1.x default
    for version in had:  # every release's default asks for nothing
        assert row.asks_for_nothing(VERSIONS[version][name]) is not None, version


@pytest.mark.parametrize("name", sorted(n for n, r in ROWS.items() if r.kept))
def test_a_kept_keyword_is_in_lightning_2(name: str) -> None:
    assert name in LIGHTNING_2
