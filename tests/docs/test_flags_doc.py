"""docs/flags.md's resolution table is true: each row is resolved by the real connector."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddpkit import DDPPlugin, DDPSpawnPlugin
from ddpkit.connector import Flags, resolve
from ddpkit.testing import make_probe

DOC = Path(__file__).resolve().parents[2] / "docs" / "flags.md"
ROW = re.compile(r"^\| `Trainer\((?P<args>.*)\)` \| (?P<gpus>\d) \| (?P<rest>.*) \|$")


def _rows() -> list[tuple[str, int, list[str]]]:
    rows = []
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m:
            cells = [c.strip() for c in m.group("rest").split(" | ")]
            rows.append((m.group("args"), int(m.group("gpus")), cells))
    return rows


ROWS = _rows()


def test_the_table_is_there() -> None:
    assert len(ROWS) >= 15


def _flags(args: str) -> dict[str, object]:
    namespace = {"DDPPlugin": DDPPlugin, "DDPSpawnPlugin": DDPSpawnPlugin, "dict": dict}
    return eval(f"dict({args})", namespace)  # the docs are ours; eval keeps them literal


@pytest.mark.parametrize(("args", "gpus", "cells"), ROWS, ids=[r[0] or "()" for r in ROWS])
def test_row(args: str, gpus: int, cells: list[str]) -> None:
    accelerator, devices, training_type, launcher, warning = cells
    plan = resolve(Flags.of(**_flags(args)), make_probe(gpus=gpus))
    assert plan.accelerator.value == accelerator
    shown = (
        ", ".join(f"cuda:{i}" for i in plan.devices.value)
        if accelerator == "gpu"
        else f"{len(plan.devices.value)} × cpu"
    )
    assert shown == devices
    if plan.training_type_instance is not None:
        assert repr(plan.training_type_instance) == training_type
    else:
        assert training_type.split("(")[0] == plan.training_type.value
    assert plan.launcher.value == launcher
    assert (warning == "—") == (not plan.warnings)
    if warning.startswith("deprecated: use "):
        assert plan.warnings[0].message.endswith(warning.removeprefix("deprecated: use "))
