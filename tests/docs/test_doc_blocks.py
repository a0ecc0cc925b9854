"""How doc_blocks reads a page: which blocks run, how, and what a transcript matches."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_blocks import (
    REPO,
    Block,
    assert_transcript,
    console_commands,
    page_blocks,
    transcript_matches,
)

PAGE = REPO / "docs" / "example.md"  # never written: the text is passed in


def _blocks(text: str) -> list[Block]:
    return page_blocks(PAGE, text)


def test_languages_decide_what_runs() -> None:
    text = "\n".join(
        [
            "```python", "print(1)", "```",
            "```text", "output", "```",
            "```", "untagged", "```",
            "```toml", "[x]", "```",
            "```bash", "echo hi", "```",
            "~~~console", "ddpkit env", "~~~",
        ]
    )  # fmt: skip
    blocks = _blocks(text)
    assert [(b.language, b.runs) for b in blocks] == [
        ("python", True),
        ("text", False),
        ("", False),
        ("toml", False),
        ("bash", True),
        ("console", True),
    ]
    assert blocks[0].code == "print(1)\n"
    assert blocks[0].where == "docs/example.md:1"


def test_the_marker_on_the_line_above_keeps_a_block_from_running() -> None:
    text = "<!-- not-run: needs a SLURM cluster -->\n```bash\nsrun x\n```\n\n```bash\nls\n```\n"
    first, second = _blocks(text)
    assert (first.runs, first.not_run) == (False, "needs a SLURM cluster")
    assert (second.runs, second.not_run) == (True, None)


def test_a_python_block_named_in_its_first_line_is_a_file() -> None:
    named, script, not_a_name = _blocks(
        "```python\n# conftest.py at the root of your tests\nx = 1\n```\n"
        "```python\nimport os\n```\n"
        "```python\n# a comment\n```\n"
    )
    assert named.file_name == "conftest.py"
    assert script.file_name is None
    assert not_a_name.file_name is None


def test_console_transcripts_and_command_lists() -> None:
    transcript, listing = _blocks(
        "```console\n$ ddpkit explain --devices 2\nplan for Trainer(devices=2)\n  ...\n"
        "$ ddpkit env\n```\n"
        "```console\nscripts/main.sh   # the main job\npython a.py \\\n    --flag\n\nls\n```\n"
    )
    assert [(c.text, c.expected) for c in transcript.commands] == [
        ("ddpkit explain --devices 2", "plan for Trainer(devices=2)\n  ..."),
        ("ddpkit env", None),
    ]
    assert [c.text for c in listing.commands] == [
        "scripts/main.sh   # the main job",
        "python a.py      --flag",
        "ls",
    ]
    assert [c.line for c in listing.commands] == [8, 9, 12]


def test_a_block_inside_a_list_item_loses_the_item_indent() -> None:
    (block,) = _blocks("- item:\n\n  ```python\n  if True:\n      print(1)\n  ```\n")
    assert block.code == "if True:\n    print(1)\n"


def test_transcripts_match_line_by_line_with_ellipses() -> None:
    actual = "plan for Trainer()\n  a  1\n  b  2\ndone in 3.2 s   \n"
    assert transcript_matches("plan for Trainer()\n  a  1\n  b  2\ndone in 3.2 s", actual)
    assert transcript_matches("plan for Trainer()\n...\ndone in ... s", actual)
    assert transcript_matches("...\ndone in ... s", actual)
    assert not transcript_matches("plan for Trainer()\n  a  1", actual)  # lines left over
    assert not transcript_matches("plan for Trainer()\n...\ndone in 4.0 s", actual)
    assert not transcript_matches("plan for Trainer(devices=2)\n...", actual)


def test_a_differing_transcript_fails_showing_both() -> None:
    assert_transcript("p.md:3", "done in ... s", "done in 3.2 s\n")
    with pytest.raises(AssertionError) as failed:
        assert_transcript("p.md:3", "done in 4.0 s", "done in 3.2 s", status=1)
    assert "p.md:3: the output differs from the page's." in str(failed.value)
    assert "--- page:\ndone in 4.0 s\n--- actual (exit 1):\ndone in 3.2 s" in str(failed.value)


def test_console_commands_are_a_pages_commands_that_contain_the_text(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "```console\n$ ddpkit run a.py\nok\n$ ddpkit explain\n```\n"
        "```bash\nddpkit run b.py\n```\n```console\nddpkit run c.py\n```\n"
    )
    assert [c.text for c in console_commands(page)] == [
        "ddpkit run a.py", "ddpkit explain", "ddpkit run c.py"
    ]  # fmt: skip
    (first, third) = console_commands(page, "ddpkit run")
    assert (first.expected, third.text) == ("ok", "ddpkit run c.py")


def test_the_real_pages_parse() -> None:
    readme = page_blocks(REPO / "README.md")
    assert any(b.language == "python" and b.runs for b in readme)
    assert any(c.text.startswith("ddpkit explain") for b in readme for c in b.commands)
