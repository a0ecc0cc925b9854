"""Tracebacks as the user reads them: their own frames, with ddpkit's, torch's and Python's own
folded into one line per run of them.

Where a launcher of ddpkit's runs (the process that starts the ranks), an uncaught exception is
printed this way too (:func:`install_folding_hook`): the error that ends the script — a rank's
``ChildFailedError``, rank 0's own error — is the first thing its reader needs, not the 20 frames
in between.

A failing rank's traceback is mostly the machinery between ``trainer.fit`` and the user's
``training_step``: ddpkit's loop, torch's module call and DDP's forward, some 20 frames that say
nothing about the error. :func:`fold` keeps the frames of the user's code and writes each run of
the others as ``  ... 14 frames of ddpkit and torch``; ``DDPKIT_VERBOSE=1`` (:func:`verbose`)
keeps every frame. A library's frames are told by their file: under the directory of ddpkit, of
torch or Lightning (when imported; a module that is not imported has no frame), or of Python's
standard library.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

# VERBOSE_VARIABLE is importable too; __all__ leaves it out, as elsewhere in ddpkit (ruff and
# tests/test_public_api.py sort SCREAMING_CASE names differently).

#: the environment variable that keeps every frame (1, true, yes or on)
VERBOSE_VARIABLE = "DDPKIT_VERBOSE"

#: the libraries whose frames are folded, by top-level package, and the name a report uses
_PACKAGES = {
    "ddpkit": "ddpkit",
    "torch": "torch",
    "lightning": "Lightning",
    "pytorch_lightning": "Lightning",
    "lightning_fabric": "Lightning",
}
_STDLIB = "Python"
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def first_line(exc: BaseException) -> str:
    """'RuntimeError: boom': an exception's type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def verbose(env: Mapping[str, str] | None = None) -> bool:
    """True when ``DDPKIT_VERBOSE`` asks for every frame."""
    value = (os.environ if env is None else env).get(VERBOSE_VARIABLE, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def fold_hint() -> str:
    """The line that ends a report whose tracebacks were folded."""
    return f"ddpkit folded its own, torch's and Python's frames: {VERBOSE_VARIABLE}=1 shows them."


def _roots() -> list[tuple[str, str]]:
    roots = []
    for package, name in _PACKAGES.items():
        module = sys.modules.get(package)
        path = getattr(module, "__file__", None)
        if path:
            roots.append((str(Path(path).parent) + os.sep, name))
    for key in ("stdlib", "platstdlib"):
        roots.append((str(Path(sysconfig.get_paths()[key])) + os.sep, _STDLIB))
    return roots


def library_of(filename: str, roots: list[tuple[str, str]] | None = None) -> str | None:
    """The library a frame's file belongs to ('ddpkit', 'torch', 'Lightning', 'Python'), or None
    for the user's own code (an installed third-party package counts as the user's)."""
    if filename.startswith("<frozen "):
        return _STDLIB
    for root, name in _roots() if roots is None else roots:
        if filename.startswith(root):
            if name == _STDLIB and ("site-packages" in filename or "dist-packages" in filename):
                continue  # a third-party package, not the standard library
            return name
    return None


@dataclass(frozen=True)
class Folded:
    """An exception's traceback, as a report shows it."""

    #: the whole traceback (``traceback.format_exception``'s text), its library frames folded
    text: str
    #: how many frames were folded (0: the text is the full traceback)
    folded: int
    #: the innermost frame of the user's code: ``/path/x.py:16, in f: raise ValueError(...)``
    where: str


def fold(exc: BaseException, *, keep_all: bool | None = None) -> Folded:
    """``exc``'s traceback with the runs of library frames folded (``keep_all``: none folded;
    by default as :func:`verbose` says). The innermost frame stays when it is a library's and
    the exception is not ddpkit's own: there the error was raised."""
    keep = verbose() if keep_all is None else keep_all
    root = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    roots = _roots()
    lines: list[str] = []
    folded = 0
    for message, part in reversed(list(_chain(root))):
        if message:
            lines.append(message)
        if part.stack:
            lines.append("Traceback (most recent call last):\n")
            frames, count = _frames(part, keep, roots)
            lines += frames
            folded += count
        lines += list(part.format_exception_only())
    return Folded("".join(lines), folded, _where(root, roots))


def _chain(
    exc: traceback.TracebackException,
) -> Iterator[tuple[str, traceback.TracebackException]]:
    """Each exception of the chain, outermost first, with the line that joins it to the one
    before it (as Python prints them, last first)."""
    seen: set[int] = set()
    current: traceback.TracebackException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if current.__cause__ is not None:
            yield _CAUSE, current
            current = current.__cause__
        elif current.__context__ is not None and not current.__suppress_context__:
            yield _CONTEXT, current
            current = current.__context__
        else:
            yield "", current
            current = None


def _frames(
    part: traceback.TracebackException, keep: bool, roots: list[tuple[str, str]]
) -> tuple[list[str], int]:
    stack = part.stack
    if keep:
        return list(stack.format()), 0
    ours = _is_ddpkit_error(part)
    libs = [library_of(f.filename, roots) for f in stack]
    if libs and libs[-1] is not None and not ours:
        libs[-1] = None  # where a library raised: shown
    lines: list[str] = []
    folded = 0
    i = 0
    while i < len(stack):
        j = i
        while j < len(stack) and (libs[j] is None) == (libs[i] is None):
            j += 1
        if libs[i] is None:
            lines += traceback.StackSummary.from_list(stack[i:j]).format()
        else:
            names = list(dict.fromkeys(n for n in libs[i:j] if n is not None))
            count = j - i
            lines.append(f"  ... {count} frame{'s' if count > 1 else ''} of {_and(names)}\n")
            folded += count
        i = j
    return lines, folded


def _is_ddpkit_error(part: traceback.TracebackException) -> bool:
    module = getattr(part, "exc_type_module", None) or getattr(part.exc_type, "__module__", "")
    return str(module).startswith("ddpkit.")


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _where(root: traceback.TracebackException, roots: list[tuple[str, str]]) -> str:
    """The innermost user frame of the exception the chain ends with (the one raised last)."""
    for frame in reversed(root.stack):
        if library_of(frame.filename, roots) is None:
            source = (frame.line or "").strip()
            at = f"{frame.filename}:{frame.lineno}, in {frame.name}"
            return f"{at}: {source}" if source else at
    return ""


ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], object]


class FoldingHook:
    """``sys.excepthook`` that prints an uncaught exception with its library frames folded, and
    ends with the line that says how to see them (``DDPKIT_VERBOSE=1``: ``previous`` prints it
    whole, as Python would)."""

    def __init__(self, previous: ExceptHook) -> None:
        self.previous = previous

    def __call__(
        self, kind: type[BaseException], value: BaseException, tb: TracebackType | None
    ) -> None:
        if verbose():
            self.previous(kind, value, tb)
            return
        shown = fold(value, keep_all=False)
        text = shown.text
        hint = fold_hint()
        if shown.folded and hint not in text:
            text += hint + "\n"
        sys.stderr.write(text)
        sys.stderr.flush()


def install_folding_hook() -> None:
    """Print this process's uncaught exceptions folded, once per process, in place of Python's
    own printing only: a hook the user (or a tool: a debugger, an error reporter) set is left
    as it is."""
    global _installed
    if not _installed and sys.excepthook is sys.__excepthook__:
        sys.excepthook = FoldingHook(sys.excepthook)
        _installed = True


def folding_installed() -> bool:
    """True once :func:`install_folding_hook` ran in this process."""
    return _installed


_installed = False
