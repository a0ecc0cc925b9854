"""The README's `ddpkit explain` transcripts are the CLI's real output."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ddpkit.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```console\n\$ ddpkit (explain[^\n]*)\n(.*?)\n```", re.S)
TRANSCRIPTS = BLOCK.findall(README.read_text())


def test_readme_has_transcripts() -> None:
    assert len(TRANSCRIPTS) >= 2


@pytest.mark.parametrize(("command", "expected"), TRANSCRIPTS, ids=[t[0] for t in TRANSCRIPTS])
def test_transcript(command: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(shlex.split(command)) == 0
    assert capsys.readouterr().out.rstrip() == expected.rstrip()


def test_readme_names_the_two_commands_and_ci_runs_the_test_one() -> None:
    text = README.read_text()
    assert "scripts/main.sh" in text
    assert "scripts/test.sh" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci
