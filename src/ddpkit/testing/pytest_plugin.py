"""ddpkit's pytest plugin: hooks and fixtures only; the work lives in ddpkit.testing's modules.

Load it with ``-p ddpkit.testing.pytest_plugin`` or ``pytest_plugins =
["ddpkit.testing.pytest_plugin"]`` (it never loads itself). It gives:

- an autouse fixture that destroys any process group a test left (``--ddpkit-strict-leaks``
  or ini ``ddpkit_strict_leaks = true``: the test fails for it) and fails a test that leaves
  child processes running;
- ``@pytest.mark.standalone(timeout=None, fresh_interpreter=False)``: the test runs in a
  process of its own;
- ``@pytest.mark.distributed(world_size=2, backend="gloo", timeout=None,
  fresh_interpreter=False)`` and the ``dist`` fixture: the test runs on ``world_size`` new ranks
  with a process group initialized;
- the warm start of those processes (:mod:`ddpkit.testing._warm_start`): forks of a zygote
  that preloaded torch once per session (``--ddpkit-fresh-interpreter`` or ini
  ``ddpkit_fresh_interpreter = true``: fresh interpreters).

See docs/testing.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddpkit.testing import _distributed as distributed
from ddpkit.testing import _folding as folding
from ddpkit.testing import _leaks as leaks
from ddpkit.testing import _runner as runner
from ddpkit.testing import _warm_start
from ddpkit.testing._distributed import DistInfo
from ddpkit.testing._markers import DISTRIBUTED_HELP, STANDALONE_HELP, DistributedSpec
from ddpkit.testing._worker import IsolatedProcess

# pytest finds the hooks by name; the one name a test uses is the fixture.
__all__ = ["dist"]

if IsolatedProcess.from_env() is None:  # a session's process, not a test's
    _warm_start.before_collection()

_CHILD = pytest.StashKey[IsolatedProcess | None]()
_LEAKERS = pytest.StashKey[list[str]]()
_DIST = pytest.StashKey[DistInfo]()
_WARM = pytest.StashKey[_warm_start.WarmStart | None]()


_OPTIONS = {
    "strict-leaks": "fail a test that leaves a torch.distributed process group initialized "
    "(default: destroy it and list the test in the summary)",
    "fresh-interpreter": "start every standalone test and distributed rank as a fresh "
    "interpreter (default: a fork of a zygote that preloaded torch once for the session)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ddpkit")
    for name, help in _OPTIONS.items():  # each a flag, and an ini value that says the same
        group.addoption(f"--ddpkit-{name}", action="store_true", default=None, help=help)
        ini = "ddpkit_" + name.replace("-", "_")
        parser.addini(ini, type="bool", default=False, help=f"like --ddpkit-{name}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", STANDALONE_HELP)
    config.addinivalue_line("markers", DISTRIBUTED_HELP)
    # First of all configure hooks: a rank the test started sends its output to its own log
    # before pytest's faulthandler and terminal writer take hold of it.
    child = IsolatedProcess.from_env()
    if child is not None:
        _become_child(config, child)
        return
    config.stash[_CHILD] = None
    config.stash[_LEAKERS] = []
    config.stash[_WARM] = _warm_start.configure(config)


def _become_child(config: pytest.Config, child: IsolatedProcess) -> None:
    """This process is one of an isolated test's: leave its reports for the parent."""
    child.start()
    config.pluginmanager.register(_ChildReporter(config, child), "ddpkit-child-reporter")
    config.stash[_CHILD] = child
    config.stash[_LEAKERS] = []
    config.stash[_WARM] = None


def _as_test_process(config: pytest.Config, item: pytest.Item) -> None:
    """In a process forked from the session itself (:mod:`ddpkit.testing._warm_start`), what
    configure and collection do in a test's own interpreter."""
    child = IsolatedProcess.from_env()
    if child is None:
        raise RuntimeError("a test's process was forked without its ddpkit environment")
    _become_child(config, child)
    _child_items(config, [item])


def _warm(config: pytest.Config) -> _warm_start.WarmStart | None:
    """The session's warm start, where it may start a zygote."""
    warm = config.stash.get(_WARM, None)
    fresh = runner.option(config, "ddpkit_fresh_interpreter")
    if warm is None or config.option.collectonly or fresh:
        return None
    return warm


_MARKED = re.compile(rb"mark\.(standalone|distributed)\b")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> None:
    """A test file that marks a test standalone or distributed (read before pytest imports it)
    starts the zygote, which preloads torch while the collection goes on."""
    warm = _warm(parent.config)
    if warm is None or file_path.suffix != ".py":
        return
    try:
        marked = _MARKED.search(file_path.read_bytes()) is not None
    except OSError:
        return
    if marked:
        warm.early(os.environ)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Isolated tests will run: the session forks itself into the zygote (last of the hooks, so
    that the fork holds what every plugin did with the collection), or the zygote preloads what
    the collection imported. None: no zygote."""
    warm = _warm(session.config)
    if warm is None or not any(runner.isolation_of(i) is not None for i in session.items):
        _warm_start.end(warm)
    else:
        _warm_start.after_collection(session, warm, _as_test_process)


def pytest_unconfigure(config: pytest.Config) -> None:
    _warm_start.end(config.stash.get(_WARM, None))


def _is_child(config: pytest.Config) -> bool:
    return config.stash.get(_CHILD, None) is not None


def _child_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test's own process and its items. Hypothesis's plugin imports all of hypothesis at the
    end of the session (its terminal summary), about a second per rank per test — in a session
    whose output nobody reads. Unless the test is a hypothesis test, its process goes without
    it."""
    plugin = config.pluginmanager.get_plugin("hypothesispytest")
    if plugin is not None and not any(
        getattr(getattr(item, "obj", None), "is_hypothesis_test", False) for item in items
    ):
        config.pluginmanager.unregister(plugin)
    # The parent ends the process tree at the timeout and shows every rank's stacks;
    # pytest-timeout firing first inside one rank would show one.
    if config.pluginmanager.has_plugin("timeout"):
        for item in items:
            item.add_marker(pytest.mark.timeout(0), append=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _is_child(config):
        _child_items(config, items)
        return
    if not config.pluginmanager.has_plugin("timeout"):
        return
    for item in items:
        try:
            spec = runner.spec_of(item)  # None: the test is not isolated
        except ValueError:
            continue  # reported when the test runs
        timeout = None if spec is None else runner.timeout_of(item, spec)
        if timeout is not None:
            item.add_marker(
                pytest.mark.timeout(timeout + runner.PARENT_TIMEOUT_SLACK_SECONDS), append=False
            )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if _is_child(item.config) or runner.isolation_of(item) is None:
        return None
    runner.run(item, nextitem, item.config.stash.get(_WARM, None))
    return True


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failure that passed through ddpkit: its frames of ddpkit and torch left out of the
    report (:mod:`ddpkit.testing._folding`)."""
    if call.excinfo is not None:
        call.excinfo = folding.fold_failure(item.config, call.excinfo) or call.excinfo
    return (yield)


@dataclass(eq=False)  # a plugin: registered by identity
class _ChildReporter:
    """In an isolated test's interpreter: leave every test report for the parent."""

    config: pytest.Config
    child: IsolatedProcess

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        self.child.record_report(data)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    leakers = terminalreporter.config.stash.get(_LEAKERS, [])
    if leakers:
        terminalreporter.write_sep("-", "ddpkit: process groups left initialized (destroyed)")
        for nodeid in leakers:
            terminalreporter.write_line(nodeid)
        terminalreporter.write_line(
            "Fix: destroy the group in the test; --ddpkit-strict-leaks fails these tests."
        )


@pytest.fixture(autouse=True)
def _ddpkit_isolation(request: pytest.FixtureRequest) -> Iterator[None]:
    """Before each test: note this process's children (and, in a rank of a distributed test,
    join its process group). After: destroy any process group, end the children it left."""
    item = request.node
    config = request.config
    child = config.stash.get(_CHILD, None)
    snapshot = leaks.ChildSnapshot()
    if child is not None and runner.isolation_of(item) == "distributed":
        spec = runner.spec_of(item)
        assert isinstance(spec, DistributedSpec)
        child.mark_arrived()
        item.stash[_DIST] = distributed.init_group(spec)
    yield
    problems = []
    if _DIST in item.stash:
        leaks.destroy_leaked_process_group()  # the test's own group: not a leak
    leaked_group = leaks.destroy_leaked_process_group()
    if leaked_group is not None:
        if runner.option(config, "ddpkit_strict_leaks"):
            problems.append(leaks.leaked_group_message(item.nodeid, leaked_group))
        else:
            config.stash[_LEAKERS].append(item.nodeid)
    leaked = leaks.leaked_children(snapshot, allow_ddpkit_ranks=child is not None)
    if leaked:
        leaks.end_leaked(leaked)
        problems.append(leaks.leaked_children_message(item.nodeid, leaked))
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def dist(request: pytest.FixtureRequest) -> DistInfo:
    """The rank, world size, device and backend of a ``@pytest.mark.distributed`` test."""
    info: DistInfo | None = request.node.stash.get(_DIST, None)
    if info is None:
        pytest.fail(
            f"{request.node.nodeid} uses the dist fixture without @pytest.mark.distributed. "
            f"Fix: decorate it with @pytest.mark.distributed(world_size=2).",
            pytrace=False,
        )
    return info
