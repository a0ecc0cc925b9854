"""docs/lightning-2x-surface.md, written from the surface table: one page where a user finds any
Lightning 2.x name and what ddpkit's own Trainer, Module, DataModule, callbacks and loggers do
with it (``scripts/lightning_2x_table.py`` writes it; a test holds it to the table)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ddpkit._lightning_surface.rules import STATUSES

_INTRO = """\
# Lightning 2.x's surface on ddpkit's own objects

Every public name of Lightning {lightning}'s `Trainer`, `LightningModule` (its hook mixins and
`HyperparametersMixin` included; what it inherits from `torch.nn.Module` is left out, as
`ddpkit.Module` is an `nn.Module` too), `LightningDataModule`, `Callback`, every class
`pytorch_lightning.callbacks` and `pytorch_lightning.loggers` export — each constructor keyword
with its default, each method with its signature, each property and attribute — read from the
installed Lightning, with one status for ddpkit's counterpart (`ddpkit.Trainer`,
`ddpkit.Module`, `ddpkit.DataModule`, `ddpkit.callbacks.*`, `ddpkit.loggers.*`):

- **same**: ddpkit has it with Lightning's meaning: a keyword with the same default, a method
  that takes every call Lightning's takes, a property that reads (and sets, where Lightning's
  does), a hook the loop calls. Where a test runs it through both libraries and compares, the
  row names that test.
- **refused**: using it raises an error that names it and the way — ddpkit's own spelling, or
  a `LightningModule` on `ddpkit.lightning.Trainer`: `LightningOnlyAttributeError` (a member),
  `UnknownKeywordError` (a keyword), `LightningOnlyImportError` (a class from
  `ddpkit.callbacks` / `ddpkit.loggers`); a hook or setting of the user's module, data module or
  callback that ddpkit's loop would never call or read is refused before any rank starts.
- **difference**: ddpkit has it and does otherwise, on purpose: a row of
  [flags.md's Differences from Lightning](flags.md#differences-from-lightning) says what and
  why.
- **out of scope**: the same errors as *refused*, saying why ddpkit leaves it out.

The data is `src/ddpkit/_lightning_surface/surface_2x.json`, built from the facts of the
installed Lightning (`facts_2x.json`, `scripts/lightning_2x_surface.py`) by
`scripts/lightning_2x_table.py`, which fails on any entry the rules
(`src/ddpkit/_lightning_surface/rules.py`) leave without a status;
`tests/surface/test_surface_2x.py` holds every entry to what the code does. A callback lists
what it adds to `Callback` (a logger: to `Logger`); a class ddpkit does not have gives its
status to its keywords and members, listed in one line.

| | same | refused | difference | out of scope |
| --- | --- | --- | --- | --- |
"""


class _Notes:
    """Each distinct note once, at the end of the page; rows refer to it by number."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def ref(self, entry: dict[str, Any]) -> str:
        if entry["status"] == "same":
            test = entry.get("test")
            said = f"`{test}`" if test else ""
            return "; ".join(x for x in (entry.get("note", ""), said) if x)
        if entry["status"] == "difference":
            return f"{entry['note']} (Differences: “{entry['row']}”)"
        number = self.ids.setdefault(entry["note"], len(self.ids) + 1)
        return f"note {number}"

    def section(self) -> list[str]:
        return ["## Notes", "", *(f"{n}. {note}" for note, n in self.ids.items())]


def _counts(table: dict[str, Any]) -> list[str]:
    rows = []
    for key in ("classes", "keywords", "members"):
        counted = Counter(entry["status"] for entry in table[key].values())
        rows.append(f"| {key} | " + " | ".join(str(counted[s]) for s in STATUSES) + " |")
    return rows


def _shown(key: str, entry: dict[str, Any]) -> str:
    if "(" in key:  # a keyword: Owner(name=default)
        owner, _, name = key[:-1].partition("(")
        default = f"={entry['default']}" if "default" in entry else ""
        return f"`{owner}({name}{default})`"
    kind = entry["kind"]
    signature = entry.get("signature", "") if kind.endswith("method") else ""
    return f"`.{key.partition('.')[2]}{signature}`"


def _owned(table: dict[str, Any], owner: str) -> list[tuple[str, dict[str, Any]]]:
    keywords = [(k, e) for k, e in table["keywords"].items() if k.startswith(owner + "(")]
    members = sorted((k, e) for k, e in table["members"].items() if k.startswith(owner + "."))
    return keywords + members


def _class(table: dict[str, Any], owner: str, notes: _Notes) -> list[str]:
    info = table["classes"][owner]
    entries = _owned(table, owner)
    if info["status"] != "same":
        names = ", ".join(f"`{k.partition(owner)[2]}`" for k, _ in entries) or "none of its own"
        return [f"### `{info['exported']}.{owner}` — {info['status']} ({notes.ref(info)})", "",
                f"Its keywords and members: {names}.", ""]  # fmt: skip
    lines = [f"### `{info['exported']}.{owner}` — `{info['ddpkit']}`", ""]
    if not entries:
        return [*lines, "It adds no keyword or member of its own.", ""]
    lines += ["| name | kind | status | on ddpkit |", "| --- | --- | --- | --- |"]
    for key, entry in entries:
        kind = "keyword" if "(" in key else f"{entry['role']}, {entry['kind']}"
        row = f"| {_shown(key, entry)} | {kind} | {entry['status']} | {notes.ref(entry)} |"
        lines.append(row.replace("\n", " "))
    return [*lines, ""]


_FIRST = ("Trainer", "LightningModule", "LightningDataModule", "Callback")


def _order(owner: str, info: dict[str, Any]) -> tuple[int, str]:
    """Trainer, LightningModule, LightningDataModule, Callback, the callbacks, Logger, the
    loggers."""
    if owner in _FIRST:
        return _FIRST.index(owner), owner
    if not info["exported"].endswith("loggers"):
        return len(_FIRST), owner
    return len(_FIRST) + (1 if owner == "Logger" else 2), owner


def render(table: dict[str, Any]) -> str:
    """The whole page."""
    notes = _Notes()
    lines = [_INTRO.format(lightning=table["lightning"]).rstrip("\n"), *_counts(table), ""]
    ordered = sorted(table["classes"].items(), key=lambda item: _order(*item))
    for title, has in (("## What ddpkit has", True), ("## What ddpkit does not have", False)):
        lines += [title, ""]
        for owner, entry in ordered:
            if (entry["status"] == "same") == has:
                lines += _class(table, owner, notes)
    lines += notes.section()
    return "\n".join(lines) + "\n"
