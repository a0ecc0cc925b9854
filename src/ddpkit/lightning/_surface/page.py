"""docs/lightning-1x-surface.md, written from the surface table: one page a user can search for
any 1.x name (``scripts/lightning_1x_table.py`` writes it; a test holds it to the table)."""

from __future__ import annotations

from collections import Counter
from typing import Any

_INTRO = """\
# The Lightning 1.x surface on ddpkit.lightning

Everything a Lightning 1.x project could touch — every public module path and name of
`pytorch_lightning` 1.0 … 1.9, and every member of `Trainer`, `LightningModule`,
`LightningDataModule` and `Callback` — read from the released 1.x wheels, each with one status
under `ddpkit.lightning` (against Lightning {lightning}):

- **unchanged**: Lightning 2.x has it at the same path and takes the same call; ddpkit passes
  it through.
- **provided**: `ddpkit.lightning` provides it with 1.x's semantics — a name that moved in 2.x
  (found at its 1.x path), or ddpkit's own (a 1.x hook called where 1.x called it, a 1.x
  attribute answered from the running 2.x Trainer).
- **refused**: using it raises `LightningRemovedError` (a name or module: an `ImportError`) or
  `LightningRemovedAttributeError` (a member); a module or callback that defines a refused hook
  is refused before any rank starts. The message says why and names the 2.x fix (the note).
- **out of scope**: the same error, saying why ddpkit leaves it out (1.x's internals, hardware
  or sharded backends it does not run); a hook that is out of scope is warned about.

The data is `src/ddpkit/lightning/_surface/surface_1x.json`, built from the facts of the wheels
(`facts_1x.json`) by `scripts/lightning_1x_table.py`; `tests/lightning/test_surface_1x.py` checks
that every entry has a status and does what its status says. Names a 1.x module only imported
from elsewhere are listed under it in one line each, with the status of the name they are.

| | unchanged | provided | refused | out of scope |
| --- | --- | --- | --- | --- |
"""
_STATUSES = ("unchanged", "provided", "refused", "out of scope")


def _span(entry: dict[str, Any]) -> str:
    since, until = entry["since"], entry["until"]
    return since if since == until else f"{since}–{until}"


class _Notes:
    """Each distinct note once, at the end of the page; rows refer to it by number."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def ref(self, entry: dict[str, Any]) -> str:
        if entry.get("target"):
            return f"`{entry['target']}`"
        note = entry.get("note", "")
        if not note or entry["status"] == "provided":
            return str(note)  # short: said in the row
        number = self.ids.setdefault(note, len(self.ids) + 1)
        return f"note {number}"

    def section(self) -> list[str]:
        lines = ["## Notes", ""]
        lines += [f"{number}. {note}" for note, number in self.ids.items()]
        return lines


def _counts(table: dict[str, Any]) -> list[str]:
    rows = []
    for label, key in (("modules", "modules"), ("names", "names"), ("members", "members")):
        counted = Counter(entry["status"] for entry in table[key].values())
        rows.append(f"| {label} | " + " | ".join(str(counted[s]) for s in _STATUSES) + " |")
    return rows


def _members(table: dict[str, Any], notes: _Notes) -> list[str]:
    lines = ["## Trainer, LightningModule, LightningDataModule and Callback", ""]
    owner = ""
    for key, entry in sorted(table["members"].items()):
        cls, _, name = key.partition(".")
        if cls != owner:
            owner = cls
            lines += ["", f"### {cls}", "", "| member | 1.x | kind | status | on ddpkit |"]
            lines += ["| --- | --- | --- | --- | --- |"]
        kind = f"{entry['role']}, {entry['kind']}"
        lines.append(
            f"| `{name}` | {_span(entry)} | {kind} | {entry['status']} | {notes.ref(entry)} |"
        )
    return lines


def _modules(table: dict[str, Any], notes: _Notes) -> list[str]:
    lines = ["", "## Modules and their names", ""]
    for path, module in sorted(table["modules"].items()):
        where = notes.ref(module)
        head = f"### `{path}` — {_span(module)}, {module['status']}"
        lines += ["", head + (f" ({where})" if where else ""), ""]
        own: list[tuple[str, dict[str, Any]]] = []
        aliases: list[tuple[str, dict[str, Any]]] = []
        for name in module["names"]:
            entry = table["names"][f"{path}.{name}"]
            (aliases if entry["kind"] == "alias" else own).append((name, entry))
        if own:
            lines += ["| name | 1.x | status | on ddpkit |", "| --- | --- | --- | --- |"]
            for name, entry in own:
                ref = notes.ref(entry)
                lines.append(f"| `{name}` | {_span(entry)} | {entry['status']} | {ref} |")
        if aliases:
            listed = ", ".join(f"`{name}` ({entry['status']})" for name, entry in aliases)
            lines += ["", f"Imported here from elsewhere: {listed}."]
    return lines


def render(table: dict[str, Any]) -> str:
    """The whole page."""
    notes = _Notes()
    lines = [_INTRO.format(lightning=table["lightning"]).rstrip("\n"), *_counts(table), ""]
    lines += _members(table, notes)
    lines += _modules(table, notes)
    lines += ["", *notes.section()]
    return "\n".join(lines) + "\n"
