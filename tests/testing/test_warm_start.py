"""The warm start, end to end: isolated tests forked from one zygote per session stay as isolated
as fresh interpreters, a crash never reaches the zygote, the zygote ends with the session (also
under pytest-xdist and after a SIGKILL of the session), and what a fork cannot do safely is left
out with one line that says why."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ddpkit._runtime.ranks._scratch import PREFIX, sweep_stale_dirs
from ddpkit.testing._warm_start.forked import ForkRequest
from ddpkit.testing._warm_start.warm import WarmStart
from ddpkit.utilities import _procs as procs

PLUGIN = ("-p", "ddpkit.testing.pytest_plugin", "-p", "no:cacheprovider", "-rA")

ISOLATION = """
    import os, signal
    import pytest
    import torch
    import torch.distributed as tdist
    from torch.distributed import distributed_c10d

    STATE = []
    GROUPS = []

    def note(what):
        with open({pids!r}, "a") as fh:
            fh.write(f"{{what}} {{os.getpid()}} {{os.getppid()}}\\n")

    @pytest.mark.distributed(world_size=2)
    def test_a_leaves_everything_behind(dist):
        note("a")
        STATE.append(dist.rank)
        os.environ["LEFT_BEHIND"] = "1"
        GROUPS.append(tdist.new_group([0, 1]))  # never destroyed

    @pytest.mark.distributed(world_size=2)
    def test_b_sees_none_of_it(dist):
        note("b")
        assert STATE == [] and GROUPS == []
        assert "LEFT_BEHIND" not in os.environ
        assert len(distributed_c10d._world.pg_map) == 1  # the default group only
        tdist.barrier()

    @pytest.mark.distributed(world_size=2)
    def test_c_a_rank_crashes(dist):
        note("c")
        if dist.rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        tdist.barrier()

    @pytest.mark.distributed(world_size=2)
    def test_d_after_the_crash(dist):
        note("d")
        t = torch.tensor([float(dist.rank + 1)])
        tdist.all_reduce(t)
        assert t.item() == 3.0

    @pytest.mark.standalone
    def test_e_standalone_leaves_state():
        note("e")
        STATE.append("e")
        os.environ["LEFT_BEHIND"] = "1"

    @pytest.mark.standalone
    def test_f_standalone_sees_none_of_it():
        note("f")
        assert STATE == [] and "LEFT_BEHIND" not in os.environ
"""


def records(path: Path) -> list[tuple[str, int, int]]:
    return [(w, int(p), int(pp)) for w, p, pp in (line.split() for line in path.read_text().splitlines())]  # fmt: skip


def run_isolation(pytester: pytest.Pytester, tmp_path: Path, *extra: str) -> list[tuple[str, int, int]]:  # fmt: skip
    pids = tmp_path / "pids"
    pytester.makepyfile(test_isolation=textwrap.dedent(ISOLATION.format(pids=str(pids))))
    result = pytester.runpytest_subprocess(*PLUGIN, *extra, timeout=280)
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            "--- rank 1 (pid *): killed by signal SIGKILL (from outside the rank: often the "
            "out-of-memory killer) before it finished the test (root cause) ---"
        ]
    )
    seen = records(pids)
    assert sorted(w for w, _, _ in seen) == ["a", "a", "b", "b", "c", "c", "d", "d", "e", "f"]
    assert len({p for _, p, _ in seen}) == len(seen)  # every rank of every test: a new process
    leftover = [p for _, pid, ppid in seen for p in (pid, ppid) if procs.is_running(p)]
    assert leftover == []  # no rank and no zygote outlives the session
    return seen


@pytest.mark.timeout(300)
def test_tests_forked_from_one_zygote_share_nothing_and_a_crash_does_not_reach_it(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    seen = run_isolation(pytester, tmp_path)
    zygotes = {ppid for _, _, ppid in seen}
    assert len(zygotes) == 1  # one zygote forked every process, before and after the crash
    assert zygotes != {os.getpid()}


@pytest.mark.timeout(300)
def test_under_xdist_each_worker_has_its_zygote_and_none_outlives_the_session(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    run_isolation(pytester, tmp_path, "-n", "2")


HANGS = """
    import os, time
    import pytest

    @pytest.mark.distributed(world_size=2)
    def test_waits(dist):
        with open({pids!r}, "a") as fh:
            fh.write(f"{{os.getpid()}} {{os.getppid()}}\\n")
        time.sleep(600)
"""


@pytest.mark.timeout(300)
def test_a_session_killed_outright_takes_its_zygote_and_ranks_with_it(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    temp = tmp_path / "temp"  # the session's TMPDIR
    temp.mkdir()
    pytester.makepyfile(test_hangs=textwrap.dedent(HANGS.format(pids=str(pids))))
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", *PLUGIN],
        cwd=pytester.path,
        env={**os.environ, "TMPDIR": str(temp)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 200
        while (not pids.exists() or len(pids.read_text().splitlines()) < 2) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.1)
        session.kill()  # SIGKILL: nothing of pytest runs any more
        session.wait()
        started = {int(p) for line in pids.read_text().splitlines() for p in line.split()}
        assert len(started) == 3  # two ranks and their zygote
        deadline = time.monotonic() + 30
        while any(procs.is_running(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [p for p in started if procs.is_running(p)] == []
        # Its private directories (the test's, the zygote's) name it: the next launch's sweep
        # removes them.
        left = sorted(p for p in temp.iterdir() if p.name.startswith(PREFIX))
        assert len(left) == 2 and sorted(sweep_stale_dirs(temp)) == left
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()


# -- what a fork cannot do safely ---------------------------------------------------------------

MODULES = {
    "starts_a_thread": "import threading, time\n"
    "threading.Thread(target=time.sleep, args=(600,), name='poller', daemon=True).start()\n",
    "reads_rank": "import os\nRANK = os.environ.get('RANK', 'none')\n",
    "reads_setting": "import os\nSETTING = os.environ.get('MY_SETTING', 'unset')\n",
}

PROBE = """
    import os
    import reads_rank, reads_setting

    def test_sees_its_own_environment():
        assert reads_rank.RANK == os.environ["RANK"] == "1"
        assert reads_setting.SETTING == os.environ["MY_SETTING"]
        with open({out!r}, "w") as fh:
            fh.write(f"{{os.getppid()}}")
"""


def fork_probe(warm: WarmStart, env: dict[str, str], tmp_path: Path) -> int:
    """Fork a pytest run of PROBE from ``warm``'s zygote for ``env``; the zygote's pid."""
    zygote = warm.zygote_for(env)
    assert zygote is not None, warm.off
    out = tmp_path / "probe.out"
    request = ForkRequest(
        args=("-p", "no:cacheprovider", "-q", str(tmp_path / "test_probe.py")),
        env={**env, "RANK": "1"},
        cwd=str(tmp_path),
        log=str(tmp_path / "probe.log"),
        fd_env={},
    )
    code = zygote.fork(request).wait(timeout=60)
    assert code == 0, (tmp_path / "probe.log").read_text()
    assert int(out.read_text()) == zygote.proc.pid
    return zygote.proc.pid


@pytest.mark.timeout(300)
def test_an_unsafe_import_is_left_out_and_per_test_variables_are_read_by_each_test(
    tmp_path: Path,
) -> None:
    for name, source in MODULES.items():
        (tmp_path / f"{name}.py").write_text(source)
    (tmp_path / "test_probe.py").write_text(
        textwrap.dedent(PROBE.format(out=str(tmp_path / "probe.out")))
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
        "MY_SETTING": "first",
    }
    said: list[str] = []
    warm = WarmStart(tmp_path, said.append)
    try:
        warm.collected(["torch", "starts_a_thread", "reads_rank", "reads_setting"], env)
        first = fork_probe(warm, env, tmp_path)
        # One line for the module whose import started a thread; the zygote that forked the
        # test does not hold it (nor the one that reads RANK), but holds the one that reads
        # MY_SETTING, which every test has the same value of.
        assert said == [
            "ddpkit: the warm start leaves starts_a_thread to each test: in the zygote, "
            "importing starts_a_thread: a thread is running (poller), and a fork is not safe "
            "then."
        ]
        info = warm.zygote_for(env).info  # type: ignore[union-attr]
        assert info is not None and info.hazard is None
        assert info.left == {"reads_rank": "reads RANK at import"}
        assert "MY_SETTING" in info.reads
        # A test whose MY_SETTING differs gets a zygote that imported it with that value.
        second = fork_probe(warm, {**env, "MY_SETTING": "second"}, tmp_path)
        assert second != first and not procs.is_running(first)
    finally:
        warm.close()
    assert not procs.is_running(second)


HYPOTHESIS = """
    import sys
    import pytest
    from hypothesis import HealthCheck, given, settings, strategies as st

    @pytest.mark.distributed(world_size=2)
    def test_plain(dist, request):
        # hypothesis's plugin would import all of hypothesis at the end of this rank's session
        assert request.config.pluginmanager.get_plugin("hypothesispytest") is None

    @pytest.mark.distributed(world_size=2)
    @settings(max_examples=3, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(x=st.integers(0, 9))
    def test_with_hypothesis(dist, request, x):
        assert request.config.pluginmanager.get_plugin("hypothesispytest") is not None
        assert 0 <= x <= 9
"""


@pytest.mark.timeout(200)
@pytest.mark.parametrize("verbosity", ["-q", "-v"])
def test_ranks_keep_hypothesis_only_where_a_test_uses_it(
    pytester: pytest.Pytester, verbosity: str
) -> None:
    pytest.importorskip("hypothesis")
    pytester.makepyfile(test_hyp=textwrap.dedent(HYPOTHESIS))
    # -v imports hypothesis in the parent before collection (its report header): its modules
    # must still not be preloaded, or pytest warns in every rank that it cannot rewrite them.
    result = pytester.runpytest_subprocess(
        *PLUGIN, verbosity, "-W", "error::pytest.PytestAssertRewriteWarning", timeout=180
    )
    result.assert_outcomes(passed=2)


DDP_AT_EXIT = """
    import atexit, sys
    from pathlib import Path
    import pytest
    import torch

    def note(what):
        with open({record!r}, "a") as fh:
            fh.write(what + "\\n")

    def gloo_threads(name, rank):
        names = [(t / "comm").read_text().strip() for t in Path("/proc/self/task").iterdir()]
        note(f"{{name}} {{rank}} exit {{sorted(n for n in names if 'gloo' in n) or '-'}}")

    def train(name, dist):
        note(f"{{name}} {{dist.rank}} dynamo {{'torch._dynamo' in sys.modules}}")
        if name == "fresh":  # a fork ends through os._exit: nothing of it runs into finalization
            atexit.register(gloo_threads, name, dist.rank)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.ones(4, 2)).sum().backward()
        optimizer.step()

    @pytest.mark.distributed(world_size=2)
    def test_forked(dist):
        train("forked", dist)

    @pytest.mark.distributed(world_size=2, fresh_interpreter=True)
    def test_fresh(dist):
        train("fresh", dist)
"""


@pytest.mark.timeout(300)
def test_a_fresh_rank_exits_without_gloo_threads_and_a_forked_one_imports_no_dynamo_for_it(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """A fresh interpreter finalizes when it ends: its group is freed whole before (torch._dynamo
    imported before the group, as ddpkit's launchers do), so no gloo thread can abort it there.
    A forked rank ends through os._exit and is not made to pay that import (1.5 s of CPU)."""
    record = tmp_path / "record"
    pytester.makepyfile(test_exit=textwrap.dedent(DDP_AT_EXIT.format(record=str(record))))
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=280)
    result.assert_outcomes(passed=2)
    lines = sorted(record.read_text().splitlines())
    assert lines == [
        "forked 0 dynamo False", "forked 1 dynamo False",
        "fresh 0 dynamo True", "fresh 0 exit -",
        "fresh 1 dynamo True", "fresh 1 exit -",
    ]  # fmt: skip
