"""Build the Lightning 2.x surface table and its page from the facts of the installed Lightning.

Reads ``src/ddpkit/_lightning_surface/facts_2x.json`` (``scripts/lightning_2x_surface.py``
writes it), gives every class, constructor keyword and member its status for ddpkit's
counterpart (:mod:`ddpkit._lightning_surface.build`; an entry the rules leave without one is an
error naming it, and nothing is written), and writes ``surface_2x.json`` beside the facts and
``docs/lightning-2x-surface.md``. Run from the repository root, with the test set-up's .venv::

    .venv/bin/python scripts/lightning_2x_table.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ddpkit._lightning_surface import build, page

ROOT = Path(__file__).resolve().parents[1]
SURFACE = ROOT / "src" / "ddpkit" / "_lightning_surface"
PAGE = ROOT / "docs" / "lightning-2x-surface.md"


def main() -> None:
    facts = json.loads((SURFACE / "facts_2x.json").read_text())
    try:
        table = build.build_table(facts)
    except build.UnresolvedError as err:
        sys.exit(f"not written: {err}")
    (SURFACE / "surface_2x.json").write_text(build.dumps(table))
    PAGE.write_text(page.render(table))
    print(f"wrote {SURFACE / 'surface_2x.json'} and {PAGE}")


if __name__ == "__main__":
    main()
