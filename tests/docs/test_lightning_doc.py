"""docs/lightning.md is true: its device table is what the translation does, its keyword table
names every 1.x keyword ddpkit knows, and its Python blocks run as written."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

from ddpkit import DDPKitWarning
from ddpkit.lightning import DDPPlugin, DDPSpawnPlugin
from ddpkit.lightning._keywords import KEYWORDS
from ddpkit.lightning._translate import translate_call
from ddpkit.testing import make_probe

DOC = Path(__file__).resolve().parents[2] / "docs" / "lightning.md"
TEXT = DOC.read_text()
DEVICE_ROW = re.compile(r"^\| `Trainer\((?P<call>[^`]*)\)` \| [^|]* \| (?P<lightning>.*) \|$")


def _cells(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return [
        (m.group("call"), m.group("lightning"))
        for line in TEXT.splitlines()
        if (m := pattern.match(line))
    ]


ROWS = _cells(DEVICE_ROW)


def test_the_device_table_is_there() -> None:
    assert len(ROWS) >= 8


@pytest.mark.parametrize(("call", "lightning"), ROWS, ids=[r[0] for r in ROWS])
def test_device_row(call: str, lightning: str) -> None:
    names = {"DDPPlugin": DDPPlugin, "DDPSpawnPlugin": DDPSpawnPlugin, "dict": dict}
    kwargs: dict[str, Any] = eval(f"dict({call})", names)  # the docs are ours
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DDPKitWarning)
        result = translate_call(kwargs, make_probe(gpus=2 if "gpus" in kwargs else 0))
    assert result.devices is not None
    # The first spelling in the cell, in the quotes Python prints.
    expected = re.findall(r"`([^`]*)`", lightning)[0].replace('"', "'")
    if expected.startswith("Trainer("):
        assert result.devices.call == expected
    else:
        assert expected in result.devices.call


def test_every_1x_keyword_has_a_row() -> None:
    rows = {m.group(1) for m in re.finditer(r"^\| `(\w+)=", TEXT, re.M)}
    assert set(KEYWORDS) <= rows, sorted(set(KEYWORDS) - rows)


BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_python_block_runs_and_prints_what_it_says(block: str) -> None:
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore", DDPKitWarning)
        exec(compile(block, str(DOC), "exec"), {"__name__": "docs"})
    # A `print(...)` followed by a `# <output>` comment line, or with the output as its comment.
    promised = re.findall(r"print\(.*\)\s*#\s*(.+)|print\(.*\)\n#\s*(.+)", block)
    printed = out.getvalue().splitlines()
    assert [a or b for a, b in promised] == printed
