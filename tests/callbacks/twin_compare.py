"""Comparing what a Lightning run and a ddpkit run left behind (tests/callbacks/lightning_twin.py):
every effect, the stages each call started, and a refusal by its type and message.

A refusal is the same when both runs refuse at the same call, ddpkit's exception is of the type
:data:`REFUSALS` maps Lightning's to (what a user's ``except`` catches), and both messages hold the
fragment the case names. A case that names no fragment refuses nothing: a refusal fails it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict
from typing import Any

from twin_known import APART

#: Lightning's exception type -> the type ddpkit's must be an instance of. A Lightning type is
#: looked up along its MRO, nearest first; one with no row fails the comparison (add the row).
REFUSALS: dict[str, str] = {
    "lightning_fabric.utilities.exceptions.MisconfigurationException": (
        "ddpkit.errors.MisconfigurationError"
    ),
    "builtins.ValueError": "builtins.ValueError",
    "builtins.TypeError": "builtins.TypeError",
    "builtins.KeyError": "builtins.KeyError",
    "builtins.AttributeError": "builtins.AttributeError",
    "builtins.FileNotFoundError": "builtins.FileNotFoundError",
    "builtins.NotImplementedError": "builtins.NotImplementedError",
    "builtins.RuntimeError": "builtins.RuntimeError",
}

#: each call and the stage it starts
STAGE_OF = {
    "fit": "fit",
    "fit_one_epoch": "fit",
    "resume": "fit",
    "validate": "validate",
    "validate_verbose": "validate",
    "test": "test",
    "test_verbose": "test",
    "predict": "predict",
}

#: Lightning's own lines at every Trainer, which ddpkit does not print (docs/flags.md)
NOT_COMPARED_INFO = ("GPU available", "TPU available", "💡 Tip")
#: ddpkit's lines that Lightning 2.x does not log, each a row of docs/flags.md's "Differences
#: from Lightning" (Lightning 1.x's line for a last.ckpt that duplicates a top-k file)
DDPKIT_ONLY_INFO = ("ModelCheckpoint(save_last=True, save_top_k=-1, monitor=None) will duplicate",)


def refusal_type(lightning_mro: list[str]) -> str | None:
    """The type ddpkit's refusal must be an instance of, for a Lightning refusal of this MRO."""
    return next((REFUSALS[name] for name in lightning_mro if name in REFUSALS), None)


def compare_refusals(
    expected: dict[str, Any] | None,
    found: dict[str, Any] | None,
    fragment: str | tuple[str, ...] | None,
) -> list[str]:
    """The differences between two refusals (``None``: no refusal) of a case that expects
    ``fragment`` (or each of several) in both messages (``None``: expects no refusal)."""
    if fragment is None:
        return [
            f"unexpected refusal by {who}: {e['mro'][0]} at {e['call']}: {e['message']}"
            for who, e in (("Lightning", expected), ("ddpkit", found))
            if e is not None
        ]
    out = [
        f"{who} did not refuse"
        for who, e in (("Lightning", expected), ("ddpkit", found))
        if e is None
    ]
    if out:
        return out
    assert expected is not None and found is not None
    if expected["call"] != found["call"]:
        out.append(f"refused at another call: Lightning {expected['call']}, ddpkit {found['call']}")
    wanted = refusal_type(expected["mro"])
    if wanted is None:
        out.append(f"no REFUSALS row for Lightning's {expected['mro'][0]}")
    elif wanted not in found["mro"]:
        out.append(
            f"ddpkit raised {found['mro'][0]}, not a {wanted} (Lightning: {expected['mro'][0]})"
        )
    for who, e in (("Lightning", expected), ("ddpkit", found)):
        for part in (fragment,) if isinstance(fragment, str) else fragment:
            if part not in e["message"]:
                out.append(f"{who}'s message lacks {part!r}: {e['message']}")
    return out


def missing_stages(effects: dict[str, Any], skips: Collection[str] = ()) -> list[str]:
    """The calls (before a refusal; ``skips`` aside) whose stage did not start."""
    refused_at = (effects["error"] or {}).get("call")
    return [
        f"{call} started {started or 'nothing'}, not {STAGE_OF[call]}"
        for call, started in effects["stages"]
        if call != refused_at and call not in skips and STAGE_OF[call] not in started
    ]


def _seen_difference(a: list[Any], b: list[Any]) -> str:
    """What a callback read at the hooks: the first hook that differs in order, else every
    (hook, attribute) that differs with its first values and how often."""
    hooks_a, hooks_b = [h[:2] for h in a], [h[:2] for h in b]
    if hooks_a != hooks_b:
        return "the hooks: " + _first_difference(hooks_a, hooks_b)
    differ: dict[tuple[str, str], list[Any]] = {}
    for (hook, _, x), (_, _, y) in zip(a, b):
        for name in sorted({*x, *y}):
            if x.get(name) != y.get(name):
                differ.setdefault((hook, name), [x.get(name), y.get(name), 0])[2] += 1
    return "".join(
        f"\n    {hook}: {name} (×{n}): Lightning {u} / ddpkit {v}"
        for (hook, name), (u, v, n) in differ.items()
    )


def _first_difference(a: Any, b: Any) -> str:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"[{i}] of {len(a)} / {len(b)}: {_first_difference(x, y)}"
        longer = a if len(a) > len(b) else b
        return f"lengths {len(a)} / {len(b)}, then {longer[min(len(a), len(b))]}"
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted({*a, *b} - {k for k in a if k in b and a[k] == b[k]}, key=str)
        return "".join(f"\n    {k}: {_first_difference(a.get(k), b.get(k))}" for k in keys)
    return f"Lightning {a} / ddpkit {b}"


def compare(
    lightning: Any,
    ddpkit: Any,
    *,
    refused: str | tuple[str, ...] | None = None,
    known: Collection[str] = (),
    ignore: Collection[str] = (),
    skips: Collection[str] = (),
) -> list[str]:
    """Every difference between two runs' Effects, as lines: the refusal, the stages each call
    started (each call's stage must have started on both sides), then every other effect.
    ``known``: the twin_known.APART differences compared all the same; ``ignore``: effects left out
    (``"field"`` or ``"field.key"``; a case says why); ``skips``: calls that may start no stage
    (Lightning skips a validate without batches; the stages are compared all the same)."""
    expected, found = asdict(lightning), asdict(ddpkit)
    out = compare_refusals(expected["error"], found["error"], refused)
    if (expected["error"] is None) != (found["error"] is None):
        return out  # one ran what the other refused: the rest differs for that reason alone
    out += [f"Lightning: {m}" for m in missing_stages(expected, skips)]
    out += [f"ddpkit: {m}" for m in missing_stages(found, skips)]
    expected["info"] = [m for m in expected["info"] if not m.startswith(NOT_COMPARED_INFO)]
    found["info"] = [m for m in found["info"] if not m.startswith(DDPKIT_ONLY_INFO)]
    for name, drop in APART.items():
        if name not in known:
            drop(expected, found)
    for path in ignore:  # "field" or "field.key"
        for effects in (expected, found):
            *parents, last = path.split(".")
            holder = effects
            for part in parents:
                holder = holder[part]
            del holder[last]
    for key in expected:
        if key == "error" or key not in found or expected[key] == found[key]:
            continue
        show = _seen_difference if key == "seen" else _first_difference
        out.append(f"{key}: {show(expected[key], found[key])}")
    return out
