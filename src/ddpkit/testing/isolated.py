"""Running a standalone or distributed test from the parent pytest, in place of pytest's own
runtest protocol: the parent sets up no fixture and runs nothing of the test itself; it starts
the fresh interpreters, waits, and logs the reports they tell it to."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest

from ddpkit.errors import MisconfigurationError
from ddpkit.testing.child import child_environment
from ddpkit.testing.distributed import rank_environment
from ddpkit.testing.markers import (
    DistributedSpec,
    StandaloneSpec,
    distributed_spec,
    resolve_timeout,
    standalone_spec,
)
from ddpkit.testing.report import distributed_reports, failed_reports, standalone_reports
from ddpkit.testing.standalone import forwarded_args, node_argument, pytest_command
from ddpkit.testing.supervise import Job
from ddpkit.utilities.ports import bind_free_port

__all__ = ["isolation_of", "run", "spec_of", "suite_timeout", "timeout_of"]

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
    if kind == "distributed":
        return distributed_spec(marker.args, marker.kwargs)
    return standalone_spec(marker.args, marker.kwargs)


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


def _deserializer(config: pytest.Config) -> Any:
    def deserialize(data: Mapping[str, Any]) -> Any:
        data = dict(data)
        # JSON turned the tuples of a report into lists; pytest's terminal wants them back.
        for key in ("location", "longrepr"):
            if isinstance(data.get(key), list):
                data[key] = tuple(data[key])
        data["sections"] = [tuple(s) for s in data.get("sections", [])]
        return config.hook.pytest_report_from_serializable(config=config, data=data)

    return deserialize


def _command(item: pytest.Item) -> list[str]:
    config = item.config
    return pytest_command(
        node=node_argument(item.nodeid, item.path),
        rootdir=config.rootpath,
        inifile=config.inipath,
        forwarded=forwarded_args(config.invocation_params.args),
        xdist=config.pluginmanager.has_plugin("xdist"),
    )


def _standalone(item: pytest.Item, spec: StandaloneSpec, directory: Path) -> list[Any]:
    log = directory / "rank0.log"
    env = child_environment(os.environ, directory=directory, parent_pid=os.getpid(), log=log)
    job = Job(directory)
    job.start(0, _command(item), env, cwd=item.config.invocation_params.dir, log=log)
    end = job.wait(timeout_of(item, spec))
    return standalone_reports(item, end, _deserializer(item.config))


def _distributed(item: pytest.Item, spec: DistributedSpec, directory: Path) -> list[Any]:
    command = _command(item)
    job = Job(directory)
    # Bound here on port 0, handed to rank 0's store: no fixed port, no race for it.
    sock = bind_free_port("127.0.0.1")
    try:
        for rank in range(spec.world_size):
            log = directory / f"rank{rank}.log"
            env = child_environment(
                os.environ, directory=directory, parent_pid=os.getpid(), log=log
            )
            store_fd = sock.fileno() if rank == 0 else None
            env = rank_environment(
                env,
                rank=rank,
                world_size=spec.world_size,
                port=sock.getsockname()[1],
                store_fd=store_fd,
                cpu_count=os.cpu_count() or 1,
            )
            job.start(
                rank,
                command,
                env,
                cwd=item.config.invocation_params.dir,
                log=log,
                pass_fds=() if store_fd is None else (store_fd,),
            )
    except BaseException:
        job.kill()  # end what started
        raise
    finally:
        sock.close()
    end = job.wait(timeout_of(item, spec))
    return distributed_reports(item, spec, end, _deserializer(item.config))


def _reports(item: pytest.Item) -> list[Any]:
    try:
        spec = spec_of(item)
    except MisconfigurationError as err:
        return failed_reports(item, "setup", str(err))
    assert spec is not None
    directory = Path(tempfile.mkdtemp(prefix="ddpkit-test-"))  # mode 0700
    try:
        (directory / "tmp").mkdir()  # the processes' PYTEST_DEBUG_TEMPROOT
        if isinstance(spec, DistributedSpec):
            return _distributed(item, spec, directory)
        return _standalone(item, spec, directory)
    except OSError as err:
        return failed_reports(
            item, "setup", f"ddpkit could not start the test's interpreter: {err}"
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _teardown_collectors(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # What pytest's runner does after every item: tear down the modules, classes and their
    # fixtures the next item does not share (set up by the items before this one). The parent
    # set up nothing for this item itself.
    item.session._setupstate.teardown_exact(nextitem)


def run(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The runtest protocol of an isolated item, in the parent."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    try:
        reports = _reports(item)
    except pytest.fail.Exception as err:
        # pytest-timeout's own timeout fired while the parent waited (the tree is ended by
        # then): the test fails with its message, the session goes on.
        reports = failed_reports(item, "call", str(err))
    call = pytest.CallInfo.from_call(lambda: _teardown_collectors(item, nextitem), when="teardown")
    if call.excinfo is not None:
        teardown = pytest.TestReport.from_item_and_call(item, call)
        reports = [r for r in reports if r.when != "teardown"] + [teardown]
    for rep in reports:
        ihook.pytest_runtest_logreport(report=rep)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
