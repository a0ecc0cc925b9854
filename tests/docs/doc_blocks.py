"""The code blocks of README.md and docs/**/*.md, and how each is run (docs/writing-docs.md).

- ```python: a script, run with ``python`` in the page's scratch folder. If its first line is
  ``# NAME.py`` (words may follow), it is a file to save as NAME.py instead, and a later
  command of the page must run it (``python NAME.py``; ``pytest`` for test files and
  ``conftest.py``).
- ```console: lines that start with ``$ `` are commands and the lines under each are its output,
  compared (``...`` alone on a line stands for any lines, ``...`` inside a line for any text);
  with no ``$ `` line, every line is a command. A command must exit 0 unless its output is
  shown, in which case the output is what counts.
- ```bash, ```sh, ```shell: one script, run with ``bash -e``.
- Any other language, or none, is not code to run (output, ini files ...).
- ``<!-- not-run: REASON -->`` on the line above a block: not run, for that reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Block",
    "Command",
    "assert_transcript",
    "console_commands",
    "page_blocks",
    "pages",
    "transcript_matches",
]

REPO = Path(__file__).resolve().parents[2]
RUN_AS_SCRIPT = frozenset({"python", "py"})
RUN_AS_COMMANDS = frozenset({"console"})
RUN_AS_SHELL = frozenset({"bash", "sh", "shell"})
RUNNABLE = RUN_AS_SCRIPT | RUN_AS_COMMANDS | RUN_AS_SHELL

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")
_FILE_NAME = re.compile(r"^#\s*(?P<name>[\w.-]+\.py)\b")


@dataclass(frozen=True)
class Command:
    """A shell command of a console block, and the output shown under it (``None``: none)."""

    line: int
    text: str
    expected: str | None = None


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    """1-based line of the opening fence."""
    language: str
    code: str
    not_run: str | None = None
    """The reason given in a ``<!-- not-run: ... -->`` marker, if any."""
    commands: tuple[Command, ...] = field(default=())

    @property
    def where(self) -> str:
        page = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page
        return f"{page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUNNABLE and self.not_run is None

    @property
    def file_name(self) -> str | None:
        """For a python block that is a file to save: its name."""
        if self.language not in RUN_AS_SCRIPT:
            return None
        first = self.code.lstrip("\n").split("\n", 1)[0]
        match = _FILE_NAME.match(first)
        return match.group("name") if match else None


def pages(root: Path = REPO) -> list[Path]:
    """README.md and every page under docs/, in a stable order."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def page_blocks(page: Path, text: str | None = None) -> list[Block]:
    lines = (page.read_text() if text is None else text).split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence) and lines[end].strip().strip(fence[0]) == ""
        ):
            end += 1
        body = "\n".join(_dedent(line, indent) for line in lines[i + 1 : end])
        marker = _NOT_RUN.match(lines[i - 1]) if i > 0 else None
        language = (opening.group("info").split() or [""])[0].lower()
        blocks.append(
            Block(
                page=page,
                line=i + 1,
                language=language,
                code=body + "\n",
                not_run=marker.group("reason") if marker else None,
                commands=_commands(body, i + 2) if language in RUN_AS_COMMANDS else (),
            )
        )
        i = end + 1
    return blocks


def _dedent(line: str, indent: int) -> str:
    """A block inside a list item is indented like its fence; its lines lose that indent."""
    cut = len(line) - len(line.lstrip())
    return line[min(cut, indent) :]


def _commands(body: str, first_line: int) -> tuple[Command, ...]:
    lines = body.split("\n")
    if not any(line.startswith("$ ") for line in lines):
        # A list of commands; a trailing backslash continues one on the next line.
        joined: list[Command] = []
        pending, start = "", 0
        for number, line in enumerate(lines, first_line):
            if not line.strip() and not pending:
                continue
            start = start if pending else number
            pending += line
            if line.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            joined.append(Command(start, pending))
            pending = ""
        return tuple(joined)
    commands: list[Command] = []
    text, start = "", 0
    output: list[str] = []
    for number, line in enumerate(lines, first_line):
        if line.startswith("$ "):
            if text:
                commands.append(Command(start, text, _shown(output)))
            text, output, start = line[2:], [], number
        elif text.endswith("\\") and not output:
            text = text[:-1] + " " + line.strip()
        else:
            output.append(line)
    if text:
        commands.append(Command(start, text, _shown(output)))
    return tuple(commands)


def _shown(output: list[str]) -> str | None:
    text = "\n".join(output).rstrip()
    return text or None


def transcript_matches(expected: str, actual: str) -> bool:
    """``actual`` is what ``expected`` shows: line by line, trailing spaces ignored; a line
    that is only ``...`` matches any number of lines, ``...`` inside a line any text."""
    pattern = []
    for line in expected.rstrip().split("\n"):
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            parts = [re.escape(part) for part in line.rstrip().split("...")]
            pattern.append("[^\n]*".join(parts) + r"[ \t]*\n")
    text = "\n".join(line.rstrip() for line in actual.rstrip().split("\n")) + "\n"
    return re.fullmatch("".join(pattern), text) is not None


def assert_transcript(where: str, expected: str, actual: str, status: int | None = None) -> None:
    """Fail, showing both, unless ``actual`` is what the page's ``expected`` shows (``where``:
    the page and line, or the block; ``status``: the command's exit status, when known)."""
    exited = "" if status is None else f" (exit {status})"
    assert transcript_matches(expected, actual), (
        f"{where}: the output differs from the page's.\n--- page:\n{expected}\n"
        f"--- actual{exited}:\n{actual}"
    )


def console_commands(page: Path, containing: str = "") -> list[Command]:
    """The commands of ``page``'s console blocks whose text contains ``containing``, in page
    order: what a test that runs a page's own commands reads (the page marks them run there)."""
    return [
        command
        for block in page_blocks(page)
        if block.language in RUN_AS_COMMANDS
        for command in block.commands
        if containing in command.text
    ]
