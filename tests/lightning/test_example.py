"""examples/lightning_1x.py (docs/lightning.md's complete script) runs as written: the page's two
commands, read from the page (which marks them run here), on Lightning's own DDP and on ddpkit's
supervised launchers."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "docs"))
from doc_blocks import Command, console_commands  # noqa: E402

EXAMPLE = REPO / "examples" / "lightning_1x.py"
PAGE = REPO / "docs" / "lightning.md"
COMMANDS = console_commands(PAGE, "examples/lightning_1x.py")


@pytest.mark.timeout(200)
@pytest.mark.parametrize("command", COMMANDS, ids=[f"{PAGE.name}:{c.line}" for c in COMMANDS])
def test_the_1x_example_trains_on_two_ranks(tmp_path: Path, command: Command) -> None:
    assert len(COMMANDS) == 2, "docs/lightning.md's two commands of the example are these runs"
    words = shlex.split(command.text, comments=True)
    assert words[:2] == ["python", "examples/lightning_1x.py"], words
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), *words[2:]],
        cwd=tmp_path,  # its runs/ folder goes here
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr}"
    assert out.count("1.x spelling: ") == 3  # devices, progress bar, summary: once, on rank 0
    assert (
        "Lightning 2.x spelling of the device flags: "
        "Trainer(accelerator='cpu', devices=2, strategy='ddp')"
    ) in out
    strategy = "SupervisedDDPStrategy" if "--supervise" in words else "DDPStrategy"
    ran = re.search(rf"^strategy: {strategy}, epochs run: (\d+)$", out, re.M)
    assert ran is not None, out
    assert 1 <= int(ran.group(1)) <= 10  # --epochs' default; early stopping may end it sooner
    assert re.search(r"^test_loss=\d+\.\d{4}$", out, re.M)
    best = re.search(r"^best checkpoint: (\S+) \(hidden=32\)$", out, re.M)
    assert best is not None and Path(best.group(1)).is_file()
    assert list((tmp_path / "runs" / "lightning_1x").glob("logs/version_*/metrics.csv"))
