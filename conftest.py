"""Root conftest: the suite's own guards (the process-group teardown comes from ddpkit's pytest
plugin, loaded in pyproject's addopts)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Variables a test may legitimately change through monkeypatch (restored by it) are not leaks;
# anything else left in os.environ after a test is.
# TORCHINDUCTOR_CACHE_DIR: torch exports it itself on its lazy `import torch._dynamo` (the first
# optimizer or DDP wrap of the process), so it is torch's process-wide setting, not a test's leak.
_IGNORED = frozenset({"PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR"})


@pytest.fixture(autouse=True)
def _no_leaked_environment() -> Iterator[None]:
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = sorted(
        k for k in set(before) | set(after) if k not in _IGNORED and before.get(k) != after.get(k)
    )
    if changed:
        os.environ.clear()
        os.environ.update(before)
        pytest.fail(f"the test leaked environment variables: {', '.join(changed)}")


_ROOT = Path(__file__).resolve().parent
# Caches and the example's output folder may appear while a developer works; anything else a
# test leaves in the repository root is litter (a Trainer without default_root_dir, say).
_ROOT_ALLOWED = frozenset({".venv", ".pytest_cache", ".mypy_cache", ".ruff_cache", "runs", ".gl"})


@pytest.fixture(autouse=True)
def _no_litter_in_the_repository_root() -> Iterator[None]:
    before = set(os.listdir(_ROOT))
    yield
    new = sorted(set(os.listdir(_ROOT)) - before - _ROOT_ALLOWED)
    if new:
        pytest.fail(f"the test left files in the repository root: {', '.join(new)}")
