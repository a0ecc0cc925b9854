"""Every code block of README.md and docs/ that is meant to run runs as written, page by page.

Each page gets a scratch folder: a copy of the clone (so ``python examples/train.py`` works as
it does from a clone's root) with the set-up's ``.venv`` linked in, and whatever the page's
blocks save or write; its blocks run in order, as a reader who copies them one after the other
would. The rules (which block runs how, the ``not-run`` marker) are in doc_blocks.py and, for
writers, in docs/writing-docs.md. Real processes start here: run this file under the lock.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import (
    REPO,
    RUN_AS_COMMANDS,
    RUN_AS_SCRIPT,
    Block,
    assert_transcript,
    page_blocks,
    pages,
)

PAGES = [page for page in pages() if any(block.runs for block in page_blocks(page))]
#: What a shell of the reader's has, without what pytest or a launcher put in this one.
_DROPPED = ("PYTEST_", "DDPKIT_", "COLUMNS", "LINES")
#: Seconds one block or command may take (a 2-rank training run takes a few).
BLOCK_TIMEOUT = 240


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    # The copy's pyproject.toml runs ddpkit's own suite on two xdist workers; a page's pytest
    # command is a reader's, in one process.
    env["PYTEST_ADDOPTS"] = "-n 0"
    return env


def _scratch(tmp_path: Path) -> Path:
    """A copy of the clone (what its root holds, without git, caches and outputs) with the
    set-up's .venv linked in: blocks write into it, never into the repository."""
    folder = tmp_path / "page"
    shutil.copytree(REPO, folder, symlinks=True, ignore=_NOT_COPIED)
    if (REPO / ".venv").exists():
        (folder / ".venv").symlink_to(REPO / ".venv")
    return folder


_NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "runs", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
)


def _run(args: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            args,
            cwd=cwd,
            env=_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one stream, in order: what a terminal shows
            text=True,
            timeout=BLOCK_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{what} did not end within {BLOCK_TIMEOUT} s; output:\n{err.output}")


def _check(done: subprocess.CompletedProcess[str], what: str, expected: str | None) -> None:
    if expected is not None:
        assert_transcript(what, expected, done.stdout, done.returncode)
        return
    assert done.returncode == 0, f"{what} exited {done.returncode}; output:\n{done.stdout}"


def _uses(block: Block, name: str) -> bool:
    """Whether ``block`` runs the saved file ``name``: a command names it (or runs pytest, for
    a test file or conftest.py), or a script imports it."""
    texts = [c.text for c in block.commands] if block.commands else [block.code]
    if block.language in RUN_AS_SCRIPT:
        stem = Path(name).stem
        return re.search(rf"^\s*(from|import)\s+{re.escape(stem)}\b", block.code, re.M) is not None
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return any("pytest" in text for text in texts)
    return any(name in text for text in texts)


def _run_block(block: Block, folder: Path, saved: dict[str, Block]) -> None:
    for name in [n for n in saved if _uses(block, n)]:
        del saved[name]
    if block.language in RUN_AS_SCRIPT:
        script = folder / f"block_{block.line}.py"
        script.write_text(block.code)
        _check(_run([sys.executable, script.name], folder, block.where), block.where, None)
        return
    if block.language in RUN_AS_COMMANDS:
        for command in block.commands:
            what = f"{block.where.rsplit(':', 1)[0]}:{command.line} $ {command.text}"
            done = _run(["bash", "-c", command.text], folder, what)
            _check(done, what, command.expected)
        return
    script = folder / f"block_{block.line}.sh"
    script.write_text(block.code)
    _check(_run(["bash", "-e", script.name], folder, block.where), block.where, None)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    run_page(page, tmp_path)


def run_page(page: Path, tmp_path: Path) -> None:
    folder = _scratch(tmp_path)
    saved: dict[str, Block] = {}
    for block in page_blocks(page):
        if not block.runs:
            continue
        name = block.file_name
        if name is not None:
            (folder / name).write_text(block.code)
            saved[name] = block
            continue
        _run_block(block, folder, saved)
    never = [f"{b.where} (saved as {name})" for name, b in saved.items()]
    assert not never, (
        f"no later command of the page runs these files: {', '.join(never)}. Fix: add the "
        f"command that runs them (python NAME.py, or pytest for test files)"
    )


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("```python\nraise SystemExit(3)\n```\n", "exited 3"),
        ("```console\n$ echo 41\n42\n```\n", "the output differs"),
        ("```console\nfalse\n```\n", "exited 1"),
        ("```bash\nfalse\necho not reached\n```\n", "exited 1"),
        ("```python\n# helper.py\nX = 1\n```\n", "no later command of the page runs"),
    ],
    ids=["script", "transcript", "command", "shell", "unused-file"],
)
def test_a_page_that_does_not_run_as_written_fails(
    text: str, complaint: str, tmp_path: Path
) -> None:
    page = tmp_path / "page.md"
    page.write_text(text)
    with pytest.raises(AssertionError, match=complaint):
        run_page(page, tmp_path)


def test_files_a_page_saves_are_used_by_its_later_blocks(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\n# helper.py\nX = 41\n```\n"
        "```python\nfrom helper import X\nprint(X + 1)\n```\n"
        "```python\n# tool.py\nprint('tool ran')\n```\n"
        "```console\n$ python tool.py\ntool ran\n```\n"
    )
    run_page(page, tmp_path)


def test_the_pages_have_code_that_runs() -> None:
    """The extraction finds the blocks (a broken parser would make every page pass)."""
    blocks = [b for page in pages() for b in page_blocks(page)]
    assert sum(b.runs for b in blocks) >= 10
    assert {"README.md", "docs/index.md", "docs/installation.md"} <= {
        str(p.relative_to(REPO)) for p in PAGES
    }


def test_every_block_left_out_says_why() -> None:
    blocks = [b for page in pages() for b in page_blocks(page) if b.not_run is not None]
    vague = [b.where for b in blocks if len(b.not_run or "") < 15]
    assert not vague, f"a not-run marker needs its reason (docs/writing-docs.md): {vague}"
