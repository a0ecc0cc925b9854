"""The quick tier's list (tests/quick_tier.py) stays true: every entry names collected tests, and
every launcher, environment and fault class has one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from quick_tier import KINDS, QUICK

_ROOT = Path(__file__).resolve().parents[1]


def test_every_kind_has_an_entry() -> None:
    covered = {kind for kinds in QUICK.values() for kind in kinds}
    missing = {group: sorted(set(kinds) - covered) for group, kinds in KINDS.items()}
    assert not any(missing.values()), f"no quick-tier test for {missing}"
    unknown = covered - {kind for kinds in KINDS.values() for kind in kinds}
    assert not unknown, f"kinds not in KINDS: {sorted(unknown)}"


def test_every_entry_names_collected_tests() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q",
         "--collect-only", *sorted({p.split("::")[0] for p in QUICK})],
        cwd=_ROOT, capture_output=True, text=True, timeout=110, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    empty = [prefix for prefix in QUICK if not any(i.startswith(prefix) for i in ids)]
    assert not empty, f"quick-tier entries that name no test: {empty}"
