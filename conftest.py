"""Root conftest: the suite's own guards (the process-group teardown comes from ddpkit's pytest
plugin, loaded in pyproject's addopts)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The whole suite must fit in 6 minutes on 2 cores (issue 24). A test marked full_suite runs a
# second configuration of a path that another, cheaper test already runs end to end (the mark's
# reason names it): it runs with DDPKIT_FULL_SUITE=1, and is skipped with that reason otherwise.
FULL_SUITE = "DDPKIT_FULL_SUITE"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"full_suite(reason): runs only with {FULL_SUITE}=1; the reason names the test that "
        "runs the same path in every run of the suite",
    )


#: scripts/test.sh --quick sets it: only the quick tier runs (tests/quick_tier.py)
QUICK = "DDPKIT_QUICK"


def _quick_tier_only(config: pytest.Config, items: list[pytest.Item]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))
    from quick_tier import in_quick_tier

    kept = [item for item in items if in_quick_tier(item.nodeid)]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(QUICK) == "1":
        _quick_tier_only(config, items)
    if os.environ.get(FULL_SUITE) == "1":
        return
    for item in items:
        mark = item.get_closest_marker("full_suite")
        if mark is not None:
            (reason,) = mark.args
            item.add_marker(pytest.mark.skip(reason=f"{FULL_SUITE}=1 runs it; {reason}"))


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


# The launchers' scratch directories (ddpkit._runtime.ranks._scratch) are removed by the launch that
# made them, or by the next launch's sweep after a SIGKILL. A test that leaves one behind found a
# leak. They live in the temp root, which on a shared machine other runs (CI, benchmarks) fill
# and empty at any moment: so the session gets a temp root of its own (TMPDIR for every process a
# test starts), inside pytest's base temp (kept for the last few sessions, then removed).
_SCRATCH_PREFIX = "ddpkit-"


@pytest.fixture(scope="session", autouse=True)
def _session_temp_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("temp-root", numbered=False)
    saved_env, saved_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = str(root)
    try:
        yield root
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = saved_env


def _scratch_dirs(root: Path) -> set[str]:
    # The subprocess launcher's job lives as long as the script (a second fit finds its ranks),
    # so its directory is removed when this process exits, not when the test ends.
    job_module = sys.modules.get("ddpkit._runtime.launch._script_job")
    job = job_module.current_job() if job_module is not None else None
    live = ""
    if job is not None and job.files is not None:
        with contextlib.suppress(RuntimeError):  # closed already
            live = job.files.path.name
    return {
        p.name
        for p in root.iterdir()
        if p.name.startswith(_SCRATCH_PREFIX) and p.is_dir() and p.name != live
    }


@pytest.fixture(autouse=True)
def _no_scratch_directory_left(_session_temp_root: Path) -> Iterator[None]:
    before = _scratch_dirs(_session_temp_root)
    yield
    new = sorted(_scratch_dirs(_session_temp_root) - before)
    if new:
        pytest.fail(
            f"the test left ddpkit scratch directories in {_session_temp_root}: {', '.join(new)}"
        )
