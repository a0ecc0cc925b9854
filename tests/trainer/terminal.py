"""A stand-in terminal for the progress bar's tests: a text stream that says it is a TTY, and
the lines a real terminal would show after what was written to it."""

from __future__ import annotations

import io
import re


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True

    def screen(self) -> list[str]:
        """The non-blank lines left: carriage returns, newlines and "cursor up" applied."""
        lines, row, col = [""], 0, 0
        for token in re.findall(r"\x1b\[A|\r|\n|[^\r\n\x1b]+", self.getvalue()):
            if token == "\x1b[A":
                row = max(row - 1, 0)
            elif token == "\r":
                col = 0
            elif token == "\n":
                row, col = row + 1, 0
                lines += [""] * (row + 1 - len(lines))
            else:
                line = lines[row].ljust(col)
                lines[row] = line[:col] + token + line[col + len(token) :]
                col += len(token)
        return [line.rstrip() for line in lines if line.strip()]
