"""Size budgets, in code lines (a line with code on it: not blank, not only a comment, not part
of a docstring): a module ≤ 400, a class ≤ 250, a function ≤ 60. Documentation is not counted,
so a well-explained module is not pushed to split; a split is by meaning, never to fit the
budget. Code longer than its budget is listed in :data:`EXEMPT`, each entry with its reason,
and an entry must still be needed (over budget)."""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path

from source_tree import MODULES

MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 400, 250, 60

#: (qualified name, why it may be longer). Keep this short; every entry says why.
EXEMPT: dict[str, str] = {
    "ddpkit.trainer._training.FitLoop._batches": (
        "the per-step hot loop: one frame, locals and hook lists hoisted out of it"
    ),
    "ddpkit.callbacks._checkpoint": (
        "Lightning's ModelCheckpoint, whole: its hooks, its rank-zero decisions (file names, the "
        "best k, last) and the checks of its arguments are one callback's rules"
    ),
    "ddpkit.callbacks._checkpoint.ModelCheckpoint": (
        "Lightning's one class: deciding (file names, the best k, last) reads and writes the "
        "callback's own state, so it is the callback's, not a mixin's over another file"
    ),
}

_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def code_lines(source: str) -> set[int]:
    """The numbers of the lines of ``source`` that hold code: a token other than a comment,
    outside every docstring (a module's, class's or function's, and an attribute's string)."""
    docs: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines - docs


def _sized(tree: ast.AST, prefix: str, code: set[int]) -> Iterator[tuple[str, str, int]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}.{node.name}"
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            end = node.end_lineno or node.lineno
            yield name, kind, sum(1 for line in code if start <= line <= end)
            yield from _sized(node, name, code)


def _sizes(module: str, path: Path) -> Iterator[tuple[str, str, int]]:
    source = path.read_text()
    code = code_lines(source)
    yield module, "module", len(code)
    yield from _sized(ast.parse(source), module, code)


_LIMITS = {"module": MODULE_LINES, "class": CLASS_LINES, "function": FUNCTION_LINES}
SIZES = {name: (kind, size) for m, p in MODULES.items() for name, kind, size in _sizes(m, p)}


def test_budgets() -> None:
    over = [
        f"{kind} {name}: {size} code lines > {_LIMITS[kind]}"
        for name, (kind, size) in SIZES.items()
        if size > _LIMITS[kind] and name not in EXEMPT
    ]
    assert not over, "over budget (split by meaning, or add an EXEMPT entry saying why):\n" + (
        "\n".join(over)
    )


def test_every_exemption_is_still_needed() -> None:
    stale = [name for name in EXEMPT if name not in SIZES]
    assert not stale, f"exemptions for code that no longer exists: {stale}"
    within = [name for name in EXEMPT if SIZES[name][1] <= _LIMITS[SIZES[name][0]]]
    assert not within, f"exemptions for code within its budget: {within}"
    assert all(reason.strip() for reason in EXEMPT.values()), "every exemption says why"


def test_code_lines_count_code_only() -> None:
    source = '"""doc\n\nmore"""\n\n# comment\nx = """a\n# not a comment\n"""  # c\n\n\ndef f():\n    """doc"""\n    return 1\n'
    assert sorted(code_lines(source)) == [6, 7, 8, 11, 13]
