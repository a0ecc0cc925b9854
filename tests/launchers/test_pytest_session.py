"""Which processes are pytest sessions that a DDPPlugin must not re-run (the end-to-end trap is in
tests/testing/test_plugin.py)."""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest

from ddpkit._runtime.launch import _pytest_session as pytest_session
from ddpkit._runtime.launch._pytest_session import check_not_a_pytest_session, is_pytest_session
from ddpkit._runtime.ranks._names import ENV_ISOLATED_TEST
from ddpkit.errors import LaunchError


def module(
    name: str = "__main__", spec: str | None = None, file: str | None = None
) -> types.ModuleType:
    main = types.ModuleType(name)
    main.__spec__ = importlib.util.find_spec(spec) if spec else None
    if file is not None:
        main.__file__ = file
    return main


@pytest.mark.parametrize(
    ("main", "expected"),
    [
        (module(spec="pytest.__main__"), True),  # python -m pytest
        (module(file="/venv/bin/pytest"), True),  # the pytest script
        (module(file="/venv/bin/py.test"), True),
        (module(file="/repo/train.py"), False),  # a script
        (module(spec="json.tool"), False),  # python -m another module
        (module(), False),  # python -c
        (None, False),
    ],
)
def test_is_pytest_session(main: types.ModuleType | None, expected: bool) -> None:
    assert is_pytest_session(main, {}) is expected


def test_an_xdist_worker_is_a_pytest_session() -> None:
    assert is_pytest_session(module(), {"xdist.remote": types.ModuleType("xdist.remote")})
    # pytest-xdist 3.x: execnet runs the worker's code as source (no xdist.remote module) in
    # `python -c`, with xdist's plugin loaded; the worker sets PYTEST_XDIST_WORKER.
    xdist = {"xdist.plugin": types.ModuleType("xdist.plugin")}
    worker = {"PYTEST_XDIST_WORKER": "gw0"}
    assert is_pytest_session(module(), xdist, worker)
    assert not is_pytest_session(module(), xdist, {})  # python -c, xdist imported
    assert not is_pytest_session(module(), {}, worker)  # python -c a worker's test started
    assert not is_pytest_session(module(file="/repo/train.py"), xdist, worker)  # a script


def test_this_session_is_refused_and_the_fix_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "__main__", module(spec="pytest.__main__"))
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "-m", "pytest", "tests/"])
    # ddpkit's plugin is loaded in this suite: the fix is the marker alone.
    with pytest.raises(LaunchError) as info:
        check_not_a_pytest_session({})
    assert str(info.value) == (
        "DDPPlugin starts the other ranks by re-running this process's command line, and this "
        "process is a pytest session (python -m pytest tests/): every other rank would run the "
        "whole session again. Fix: mark the test @pytest.mark.standalone: ddpkit's pytest plugin "
        "(loaded here) then runs it alone, and each rank re-runs that one test."
    )
    monkeypatch.delitem(sys.modules, pytest_session.PLUGIN)
    with pytest.raises(LaunchError, match=r"Fix: load ddpkit's pytest plugin \(-p "
                       r"ddpkit\.testing\.pytest_plugin\) and mark the test "
                       r"@pytest\.mark\.standalone"):  # fmt: skip
        check_not_a_pytest_session({})


def test_the_plugins_one_test_interpreter_may_be_re_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "__main__", module(spec="pytest.__main__"))
    check_not_a_pytest_session({ENV_ISOLATED_TEST: "1"})


def test_a_script_may_be_re_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "__main__", module(file="/repo/train.py"))
    check_not_a_pytest_session({})
