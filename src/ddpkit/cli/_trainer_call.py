"""A ``Trainer(...)`` call as the user wrote it — a string, or found in a script — read with
:mod:`ast`, never run.

Only literals (numbers, strings, lists, tuples, dicts, True/False/None, ``-1``) and calls of the
classes a plan is made of — ddpkit's training-type, precision and environment plugins and
``timedelta`` — are taken; each class is called with the literals it was given, which runs its
own checks and nothing else. Anything else (a variable, an attribute, a function call) is named
in an error that says which value to write instead. Keywords the plan does not read
(``max_epochs``, ``callbacks``...) are listed, not judged.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpkit.errors import MisconfigurationError


class CallError(MisconfigurationError):
    """A call ``ddpkit explain`` cannot read: what, where, and what to write instead."""


def _classes() -> dict[str, Callable[..., Any]]:
    """The classes a call may construct, by name (imported when a call needs them)."""
    import datetime

    from ddpkit import plugins
    from ddpkit.plugins import environments

    known: dict[str, Callable[..., Any]] = {"timedelta": datetime.timedelta}
    for module in (plugins, environments):
        for name in module.__all__:
            known[name] = getattr(module, name)
    return known


@dataclass(frozen=True)
class TrainerCall:
    """One ``Trainer(...)`` call: its plan keywords with their values, the keywords the plan
    does not read, and where it was found."""

    given: dict[str, Any]
    other: tuple[str, ...] = ()
    #: "script.py, line 12" (empty for a call given as text)
    where: str = ""
    #: the call as written (one line: a script's call as ast gives it back)
    source: str = field(default="", compare=False)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_trainer(node: ast.Call) -> bool:
    return _dotted(node.func).split(".")[-1] == "Trainer"


def _value(
    node: ast.expr, where: str, classes: dict[str, Callable[..., Any]], fix: str = ""
) -> Any:
    """The value a node spells: a literal, a list/tuple/dict of values, or a known class called
    with values. ``fix``: the call with this keyword's value left for the user to write."""
    if isinstance(node, ast.List | ast.Tuple):
        items = [_value(e, where, classes, fix) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise CallError(f"{where}: a **mapping inside a dict cannot be read. Fix: write it out")
        return {
            _value(k, where, classes, fix): _value(v, where, classes, fix)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    if isinstance(node, ast.Call):
        return _construct(node, where, classes, fix)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise CallError(
            f"{where}: {ast.unparse(node)} is not a value ddpkit explain can know before the "
            f'script runs. Fix: write the value it has into the call: ddpkit explain "{fix}"'
        ) from None


def _construct(node: ast.Call, where: str, classes: dict[str, Callable[..., Any]], fix: str) -> Any:
    """A known class, called with the values it was given (its own checks run)."""
    name = _dotted(node.func).split(".")[-1]
    if name not in classes:
        raise CallError(
            f"{where}: {ast.unparse(node)} calls {name or 'an expression'}, which ddpkit "
            f"explain does not run. Fix: spell it as a literal or one of "
            f"{', '.join(sorted(classes))}"
        )
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        raise CallError(f"{where}: {ast.unparse(node)}: write its arguments out (no * or **)")
    args = [_value(a, where, classes, fix) for a in node.args]
    kwargs = {k.arg: _value(k.value, where, classes, fix) for k in node.keywords if k.arg}
    try:
        return classes[name](*args, **kwargs)
    except TypeError as err:  # a wrong keyword of timedelta(...); ddpkit's own classes say more
        raise CallError(f"{where}: {ast.unparse(node)}: {err}. Fix: see help({name})") from None


def _left_to_user(call: ast.Call, keyword: ast.keyword) -> str:
    """``call`` as written, with ``keyword``'s value as ``...`` for the user to fill in."""
    keywords = [
        ast.keyword(arg=k.arg, value=ast.Name(id="...")) if k is keyword else k
        for k in call.keywords
    ]
    return ast.unparse(ast.Call(func=call.func, args=[], keywords=keywords))


def _read(node: ast.Call, where: str, source: str) -> TrainerCall:
    if node.args:
        raise CallError(
            f"{where}{ast.unparse(node)} passes {len(node.args)} positional argument(s); the "
            f"Trainer takes keywords. Fix: name them, e.g. Trainer(accelerator='cpu', devices=2)"
        )
    if any(k.arg is None for k in node.keywords):
        raise CallError(
            f"{where}{ast.unparse(node)} passes **keywords, whose values ddpkit explain cannot "
            f"know. Fix: write the keywords out"
        )
    from ddpkit.connector._flags import DEVICE_FLAGS  # when a call is read: torch is needed then

    classes: dict[str, Callable[..., Any]] | None = None
    given: dict[str, Any] = {}
    other: list[str] = []
    written = ast.unparse(node)
    for keyword in node.keywords:
        assert keyword.arg is not None
        if keyword.arg not in DEVICE_FLAGS:
            other.append(keyword.arg)
            continue
        if classes is None:
            classes = _classes()
        fix = _left_to_user(node, keyword)
        given[keyword.arg] = _value(keyword.value, f"{where}{written}", classes, fix)
    return TrainerCall(given, tuple(other), where.rstrip(": "), source)


def parse_call(text: str) -> TrainerCall:
    """``"Trainer(accelerator='ddp_cpu', plugins=[DDPPlugin(find_unused_parameters=False)])"``
    as a :class:`TrainerCall` (a :class:`CallError` names what cannot be read)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise CallError(
            f"{text!r} is not a Python call ({err.msg}). Fix: quote it whole, e.g. "
            f"ddpkit explain \"Trainer(accelerator='cpu', devices=2)\""
        ) from None
    node = tree.body
    if not isinstance(node, ast.Call) or not _is_trainer(node):
        raise CallError(
            f"{text!r} is not a Trainer(...) call. Fix: pass the call as written in the "
            f"script, e.g. ddpkit explain \"Trainer(accelerator='cpu', devices=2)\", or the "
            f"script itself: ddpkit explain train.py"
        )
    return _read(node, "", text.strip())


def find_calls(path: Path) -> list[TrainerCall]:
    """Every ``Trainer(...)`` call in a script, in the order of its lines (the script is read,
    not run). A call ddpkit explain cannot read raises, naming its line."""
    try:
        source = path.read_text()
    except OSError as err:
        raise CallError(f"{path}: cannot read it ({err.strerror}). Fix: pass a script") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as err:
        raise CallError(
            f"{path}, line {err.lineno}: not valid Python ({err.msg}). Fix: run it once with "
            f"python to see the error"
        ) from None
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_trainer(n)]
    nodes.sort(key=lambda n: (n.lineno, n.col_offset))
    return [_read(n, f"{path}, line {n.lineno}: ", ast.unparse(n)) for n in nodes]


def read_call(text: str) -> list[TrainerCall]:
    """The call(s) ``ddpkit explain <text>`` means: a script's (a path ending in .py, or an
    existing file), else the call written out."""
    path = Path(text)
    if text.endswith(".py") or (path.is_file() and "(" not in text):
        calls = find_calls(path)
        if not calls:
            raise CallError(
                f"{path}: no Trainer(...) call in it. Fix: pass the script that builds the "
                f'Trainer, or the call itself: ddpkit explain "Trainer(devices=2)"'
            )
        return calls
    return [parse_call(text)]
