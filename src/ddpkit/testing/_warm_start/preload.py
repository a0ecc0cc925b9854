"""What the warm-start zygote imports before it forks the test processes, and the checks that
keep a fork from it as good as a fresh interpreter.

The parent chooses (:func:`candidates`): after collection, every module its test modules and
conftests imported that belongs to an installed distribution or to the standard library (torch,
numpy, ddpkit, ...) — never a test module, a conftest, a helper module next to the tests, or a
pytest plugin (pytest rewrites the asserts of those as it imports them, so they must be imported
by each test's own session).

The zygote imports them (:func:`preload`) under two guards:

- a module that reads a variable that differs from test to test (``RANK``, ``LOCAL_RANK``,
  ``MASTER_PORT``, ddpkit's ``DDPKIT_*``, ...) while it is imported would keep the zygote's value
  in every rank: its import is stopped at that read and the module is left to each test, which
  imports it with its own environment — unless it is one of the readers each test's process
  computes again (:mod:`~ddpkit.testing._warm_start.import_readers`: Lightning's and torchmetrics'
  ``rank_zero_only.rank``);
- a module whose import starts a thread, initialises CUDA or a process group makes a fork unsafe
  (the child inherits held locks and a half-copied runtime): the zygote says so and stops.

Every other variable a preloaded module read is recorded: a test whose environment differs in one
of them needs a zygote started with that environment.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ddpkit.testing._warm_start import import_readers

# Imported first: the native threads torch's import leaves make the baseline the thread check
# counts from. (numpy's OpenBLAS pool, which torch's import loads, starts none in a zygote that
# holds it, fresh_state; where nothing holds it, its pthread_atfork handler ends its threads
# before each fork.)
_FIRST = ("torch", "torch.distributed")

#: The variables that differ from one test process to the next: a module the zygote preloads
#: must not read them.
PER_TEST_VARIABLES = frozenset(
    {
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "OMP_NUM_THREADS",
        "PYTEST_CURRENT_TEST",
        "PYTEST_DEBUG_TEMPROOT",
    }
)
PER_TEST_PREFIXES = ("DDPKIT_",)


def is_per_test(key: str) -> bool:
    """Whether ``key`` is one of the variables that differ from one test process to the next."""
    return key in PER_TEST_VARIABLES or key.startswith(PER_TEST_PREFIXES)


class PerTestVariable(BaseException):
    """Raised inside a preloaded module's import when it reads a per-test variable. A
    BaseException, so that the module's own ``except Exception`` does not swallow it."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


@dataclass
class Preloaded:
    """What :func:`preload` did, as the zygote reports it to the parent when it is ready."""

    left: dict[str, str] = field(default_factory=dict)
    """Modules left to each test, and why (``reads RANK at import``)."""
    reads: set[str] = field(default_factory=set)
    """The environment variables the preloaded modules read while they were imported."""
    hazard: str | None = None
    """Why a fork of this process is unsafe (None: it is safe)."""
    whole_env: bool = False
    """Its modules were imported by the parent pytest (a fork of the session): a test whose
    environment differs in any variable but the per-test ones needs another zygote."""


def _installed_top_levels() -> set[str]:
    names = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    names |= set(importlib.metadata.packages_distributions())
    return names


def _plugin_distribution_modules() -> set[str]:
    """The top-level modules of the distributions that register pytest plugins: every one, not
    only the plugin's (hypothesis registers ``_hypothesis_pytestplugin`` and ships
    ``hypothesis`` and ``_hypothesis_globals``), since pytest marks all of a plugin
    distribution's modules for assert rewriting at startup and warns about one imported before."""
    plugin_dists, names = set(), set()
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points.select(group="pytest11"):
            plugin_dists.add(dist.metadata["Name"])
            names.add(ep.value.split(":")[0].split(".")[0])
    tops = importlib.metadata.packages_distributions().items()
    return names | {top for top, dists in tops if plugin_dists.intersection(dists)}


def candidates(
    modules: Mapping[str, ModuleType | None], plugin_modules: Collection[str]
) -> list[str]:
    """The names in ``modules`` (the parent's ``sys.modules``, in import order) that the zygote
    may preload. ``plugin_modules``: the names of the modules registered as pytest plugins in
    the parent (``-p`` plugins, conftests, ``pytest_plugins``); ``_pytest`` itself is kept."""
    installed = _installed_top_levels()
    excluded_roots = _plugin_distribution_modules() - {"_pytest", "pytest"}
    excluded = {name for name in plugin_modules if not name.startswith("_pytest.")}
    chosen = [name for name in _FIRST if name in modules]
    for name, module in modules.items():
        if module is None or name in ("__main__", "__mp_main__") or name in _FIRST:
            continue
        root = name.partition(".")[0]
        if root not in installed or root in excluded_roots:
            continue
        if any(name == p or name.startswith(p + ".") for p in excluded):
            continue
        chosen.append(name)
    return chosen


def native_threads() -> int:
    """How many threads this process runs, native ones included."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def fork_hazard(native_baseline: int) -> str | None:
    """Why forking this process now would be unsafe, or None."""
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        return f"a thread is running ({', '.join(sorted(others))})"
    native = native_threads()
    if native > native_baseline:
        return f"{native - native_baseline} native thread(s) started"
    torch: Any = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "cuda") and torch.cuda.is_initialized():
        return "CUDA is initialised"
    dist: Any = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return "a process group is initialised"
    return None


class ReadEnviron(os._Environ):
    """``os.environ``'s own variables (the same mapping, so a write reaches the real one), with
    each read passed to :meth:`read` while :attr:`active`. Inactive once it is put back (a module
    may keep a reference to it)."""

    def __init__(self, real: Any) -> None:
        super().__init__(
            real._data, real.encodekey, real.decodekey, real.encodevalue, real.decodevalue
        )
        self.real = real
        self.active = True

    def read(self, key: str) -> None:
        """Called for every read of ``key`` while active."""

    def __getitem__(self, key: str) -> str:
        # Every read comes here: Mapping's get() and ``in`` (os.getenv too) read through it.
        if self.active and isinstance(key, str):
            self.read(key)
        return super().__getitem__(key)  # type: ignore[no-any-return]


class _GuardedEnviron(ReadEnviron):
    """``os.environ`` while the zygote preloads: each read recorded, and a read of a per-test
    variable stopped."""

    def __init__(self, real: Any) -> None:
        super().__init__(real)
        self.reads: set[str] = set()

    def read(self, key: str) -> None:
        if is_per_test(key):
            if import_readers.is_known_read(import_readers.reader_of(), key):
                return  # each test's process computes its value again
            raise PerTestVariable(key)
        self.reads.add(key)


def _forget_broken(before: Collection[str]) -> None:
    """After an import that failed: drop the modules it imported whose package failed too (a
    test re-imports them whole, never half of a package)."""
    broken = []
    for name in [n for n in sys.modules if n not in before]:
        parts = name.split(".")
        if any(".".join(parts[:i]) not in sys.modules for i in range(1, len(parts))):
            broken.append(name)
    import_readers.forget(broken)  # what they set on a module that stays
    for name in broken:
        del sys.modules[name]


def preload(names: Iterable[str], into: Preloaded | None = None) -> Preloaded:
    """Import ``names`` in order under the guards of the module docstring; stop at the first
    import that makes a fork unsafe. ``into``: add to what an earlier call preloaded."""
    result = Preloaded() if into is None else into
    real = os.environ
    guarded = _GuardedEnviron(real)
    baseline = native_threads()
    os.environ = guarded  # noqa: B003 (the same variables, read through a guard)
    try:
        for name in names:
            if name in sys.modules:
                continue
            before = set(sys.modules)
            try:
                importlib.import_module(name)
            except PerTestVariable as err:
                result.left[name.partition(".")[0]] = f"reads {err.key} at import"
                _forget_broken(before)
            except Exception:  # not importable on its own here: each test imports it
                _forget_broken(before)
            if name in _FIRST:
                baseline = max(baseline, native_threads())
            hazard = fork_hazard(baseline)
            if hazard is not None:
                result.hazard = f"importing {name}: {hazard}"
                break
    finally:
        guarded.active = False
        os.environ = real  # noqa: B003
    result.reads |= guarded.reads
    return result
