"""The modules of ``src/ddpkit``, by dotted name, for the tests that read the code's shape."""

from __future__ import annotations

from pathlib import Path

__all__ = ["MODULES", "SRC"]

SRC = Path(__file__).resolve().parents[1] / "src" / "ddpkit"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}
