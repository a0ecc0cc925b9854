"""Every relative link in the README and docs/ points at a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]
# [text](target) and ![alt](target); the target ends at whitespace or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(page: Path) -> list[str]:
    targets = [m.group(1) for m in LINK.finditer(page.read_text())]
    return [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_pages_have_relative_links() -> None:
    assert sum(len(_relative_links(p)) for p in PAGES) > 10


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    missing = [
        t for t in _relative_links(page) if not (page.parent / t.split("#")[0]).resolve().exists()
    ]
    assert missing == [], f"{page.relative_to(REPO)} links to missing files: {missing}"
