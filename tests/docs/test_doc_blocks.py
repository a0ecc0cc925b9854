"""How doc_blocks reads a page: which blocks run, how, and what a transcript matches."""

from __future__ import annotations

from doc_blocks import REPO, Block, page_blocks, transcript_matches

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


def test_the_real_pages_parse() -> None:
    readme = page_blocks(REPO / "README.md")
    assert any(b.language == "python" and b.runs for b in readme)
    assert any(c.text.startswith("ddpkit explain") for b in readme for c in b.commands)
