"""Build the Lightning 1.x surface table and its page from the facts of the 1.x wheels.

Reads ``src/ddpkit/lightning/_surface/facts_1x.json`` (``scripts/lightning_1x_surface.py``
writes it from the wheels), gives every 1.x module, name and member its status against the
installed Lightning 2.x and ddpkit (:mod:`ddpkit.lightning._surface.build`; an entry the rules
leave without one is an error naming it), and writes ``surface_1x.json`` beside the facts and
``docs/lightning-1x-surface.md``. Run from the repository root, with the test set-up's .venv::

    .venv/bin/python scripts/lightning_1x_table.py
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

from ddpkit._lightning_surface.build import dumps
from ddpkit.lightning._surface import build, page

ROOT = Path(__file__).resolve().parents[1]
SURFACE = ROOT / "src" / "ddpkit" / "lightning" / "_surface"
PAGE = ROOT / "docs" / "lightning-1x-surface.md"


def main() -> None:
    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)  # its hardware banner
    facts = json.loads((SURFACE / "facts_1x.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = build.build_table(facts)
    (SURFACE / "surface_1x.json").write_text(dumps(table))
    PAGE.write_text(page.render(table))
    print(f"wrote {SURFACE / 'surface_1x.json'} and {PAGE}")


if __name__ == "__main__":
    main()
