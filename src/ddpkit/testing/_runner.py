"""Running a standalone or distributed test from the parent pytest, in place of pytest's own
runtest protocol: the parent sets up no fixture and runs nothing of the test itself; it starts
the test's processes (forks of the session's zygote, or fresh interpreters), waits, and logs the
reports they tell it to."""

from __future__ import annotations

import functools
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import pytest

from ddpkit._runtime.ranks._scratch import make_private_dir, sweep_stale_dirs
from ddpkit.errors import MisconfigurationError
from ddpkit.testing._distributed import ENV_STORE_FD, rank_environment
from ddpkit.testing._markers import (
    DistributedSpec,
    StandaloneSpec,
    distributed_spec,
    resolve_timeout,
    standalone_spec,
)
from ddpkit.testing._report import distributed_reports, failed_reports, standalone_reports
from ddpkit.testing._standalone import forwarded_args, node_argument, pytest_args, pytest_command
from ddpkit.testing._supervise import Job
from ddpkit.testing._warm_start import ForkRequest, WarmStart, Zygote, ZygoteError
from ddpkit.testing._worker import child_environment
from ddpkit.utilities._ports import bind_free_port

#: The parent's own pytest-timeout fires this long after the test's: the parent ends the tree,
#: gathers the stacks and reports before pytest-timeout would interrupt it.
PARENT_TIMEOUT_SLACK_SECONDS = 60.0


def isolation_of(item: pytest.Item) -> Literal["standalone", "distributed"] | None:
    """Which marker isolates ``item`` (distributed wins: its ranks are fresh interpreters)."""
    if item.get_closest_marker("distributed") is not None:
        return "distributed"
    if item.get_closest_marker("standalone") is not None:
        return "standalone"
    return None


def spec_of(item: pytest.Item) -> StandaloneSpec | DistributedSpec | None:
    """The isolating marker of ``item`` as a spec; MisconfigurationError when it is malformed."""
    kind = isolation_of(item)
    if kind is None:
        return None
    marker = item.get_closest_marker(kind)
    assert marker is not None
    read = distributed_spec if kind == "distributed" else standalone_spec
    return read(marker.args, marker.kwargs)


def suite_timeout(item: pytest.Item) -> float | None:
    """The item's pytest-timeout value: its ``timeout`` marker, else ``--timeout``,
    ``PYTEST_TIMEOUT``, or the ``timeout`` ini value; None without pytest-timeout."""
    config = item.config
    if not config.pluginmanager.has_plugin("timeout"):
        return None
    value: Any = None
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if value is None:
        value = config.getoption("timeout", None)
    if value is None:
        value = os.environ.get("PYTEST_TIMEOUT") or config.getini("timeout") or None
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def timeout_of(item: pytest.Item, spec: StandaloneSpec | DistributedSpec) -> float | None:
    return resolve_timeout(spec.timeout, suite_timeout(item))


def _deserialize(config: pytest.Config, data: Mapping[str, Any]) -> Any:
    data = dict(data)
    # JSON turned the tuples of a report into lists; pytest's terminal wants them back.
    for key in ("location", "longrepr"):
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    data["sections"] = [tuple(s) for s in data.get("sections", [])]
    return config.hook.pytest_report_from_serializable(config=config, data=data)


EnvOf = Callable[[dict[str, str]], dict[str, str]]


class _Launch:
    """How this test's processes start: forked from the zygote, or as fresh interpreters (the
    fallback when a fork fails, too)."""

    def __init__(self, item: pytest.Item, directory: Path, zygote: Zygote | None) -> None:
        self.item = item
        self.directory = directory
        self.zygote = zygote
        config = item.config
        self.args = pytest_args(
            node=node_argument(item.nodeid, item.path),
            rootdir=config.rootpath,
            inifile=config.inipath,
            forwarded=forwarded_args(config.invocation_params.args),
            xdist=config.pluginmanager.has_plugin("xdist"),
        )
        self.cwd = config.invocation_params.dir
        self.job = Job(directory, idle=zygote.pump if zygote is not None else time.sleep)

    def start(self, rank: int, env_of: EnvOf = dict, fds: Mapping[str, int] | None = None) -> None:
        """Start rank ``rank``: ``env_of`` adds its own variables to the test's environment;
        ``fds`` are descriptors it inherits, by the variable that names them."""
        fds = dict(fds or {})
        log = self.directory / f"rank{rank}.log"
        if self.zygote is not None:
            request = ForkRequest(
                args=tuple(self.args),
                env=env_of(self._env(self.zygote.proc.pid, log)),
                cwd=str(self.cwd),
                log=str(log),
                fd_env={name: i for i, name in enumerate(fds)},
                nodeid=self.item.nodeid,
            )
            try:
                self.job.context.adopt(rank, self.zygote.fork(request, list(fds.values())), log)
                return
            except ZygoteError:
                self.zygote = None  # the session's warm start notices at the next test
        env = env_of(self._env(os.getpid(), log))
        self.job.start(
            rank, pytest_command(self.args), env, self.cwd, log, pass_fds=tuple(fds.values())
        )

    def _env(self, parent_pid: int, log: Path) -> dict[str, str]:
        return child_environment(
            os.environ, directory=self.directory, parent_pid=parent_pid, log=log
        )


def _standalone(item: pytest.Item, spec: StandaloneSpec, launch: _Launch) -> list[Any]:
    launch.start(0)
    end = launch.job.wait(timeout_of(item, spec))
    return standalone_reports(item, end, functools.partial(_deserialize, item.config))


def _distributed(item: pytest.Item, spec: DistributedSpec, launch: _Launch) -> list[Any]:
    # Bound here on port 0, handed to rank 0's store: no fixed port, no race for it.
    sock = bind_free_port("127.0.0.1")
    port = sock.getsockname()[1]
    try:
        for rank in range(spec.world_size):
            store_fd = sock.fileno() if rank == 0 else None
            env_of = functools.partial(
                rank_environment,
                rank=rank,
                world_size=spec.world_size,
                port=port,
                store_fd=store_fd,
                cpu_count=os.cpu_count() or 1,
            )
            launch.start(rank, env_of, {} if store_fd is None else {ENV_STORE_FD: store_fd})
    except BaseException:
        launch.job.kill()  # end what started
        raise
    finally:
        sock.close()
    end = launch.job.wait(timeout_of(item, spec))
    return distributed_reports(item, spec, end, functools.partial(_deserialize, item.config))


def option(config: pytest.Config, name: str) -> bool:
    """The plugin's flag ``name`` where the command line gives it (``ddpkit_fresh_interpreter``:
    ``--ddpkit-fresh-interpreter``), else its ini value (``ddpkit_fresh_interpreter = true``)."""
    value = config.getoption(name, None)
    return bool(value) if value is not None else bool(config.getini(name))


def _zygote_of(
    item: pytest.Item, spec: StandaloneSpec | DistributedSpec, warm: WarmStart | None
) -> Zygote | None:
    if warm is None or spec.fresh_interpreter or option(item.config, "ddpkit_fresh_interpreter"):
        return None
    return warm.zygote_for(os.environ)


def _reports(item: pytest.Item, warm: WarmStart | None) -> list[Any]:
    try:
        spec = spec_of(item)
    except MisconfigurationError as err:
        return failed_reports(item, "setup", str(err))
    assert spec is not None
    # 0700, named for this process: if it is SIGKILLed, the next launch's sweep removes it.
    directory = make_private_dir()
    try:
        (directory / "tmp").mkdir()  # the processes' PYTEST_DEBUG_TEMPROOT
        launch = _Launch(item, directory, _zygote_of(item, spec, warm))
        if isinstance(spec, DistributedSpec):
            return _distributed(item, spec, launch)
        return _standalone(item, spec, launch)
    except OSError as err:
        return failed_reports(
            item, "setup", f"ddpkit could not start the test's interpreter: {err}"
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        # A launcher in the test that ddpkit killed (a timeout's SIGKILL) could not remove its
        # own scratch directory: no process of the test is left, so its owner is gone.
        sweep_stale_dirs()


def run(item: pytest.Item, nextitem: pytest.Item | None, warm: WarmStart | None) -> None:
    """The runtest protocol of an isolated item, in the parent (``warm``: the session's warm
    start; None: fresh interpreters)."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    try:
        reports = _reports(item, warm)
    except pytest.fail.Exception as err:
        # pytest-timeout's own timeout fired while the parent waited (the tree is ended by
        # then): the test fails with its message, the session goes on.
        reports = failed_reports(item, "call", str(err))
    # What pytest's runner does after every item: tear down the modules, classes and their
    # fixtures the next item does not share (set up by the items before this one). The parent
    # set up nothing for this item itself.
    call = pytest.CallInfo.from_call(
        lambda: item.session._setupstate.teardown_exact(nextitem), when="teardown"
    )
    if call.excinfo is not None:
        teardown = pytest.TestReport.from_item_and_call(item, call)
        reports = [r for r in reports if r.when != "teardown"] + [teardown]
    for rep in reports:
        ihook.pytest_runtest_logreport(report=rep)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
