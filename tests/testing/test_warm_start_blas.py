"""The warm start in a Lightning user's environment: scipy and scikit-learn imported at collection
(their OpenBLAS starts a thread pool when it loads) neither keep the session from forking itself
nor get left to each test, every forked process computes right and sizes its BLAS pools as a
fresh interpreter with its environment would, and an import that really starts a thread is still
left to each test."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from ddpkit.testing._warm_start import fresh_state
from ddpkit.testing._warm_start.forked import ForkRequest
from ddpkit.testing._warm_start.warm import WarmStart
from ddpkit.utilities import _procs as procs

pytest.importorskip("scipy")
pytest.importorskip("sklearn")
pytest.importorskip("threadpoolctl")

PLUGIN = ("-p", "ddpkit.testing.pytest_plugin", "-p", "no:cacheprovider", "-p", "no:xdist", "-rA")
CPUS = len(os.sched_getaffinity(0))

# What every test process checks and records: a BLAS computation's answer, its OpenBLAS pools
# against a fresh interpreter started from it (which inherits its C environment: a variable the
# zygote held would show there), and the value of OPENBLAS_NUM_THREADS both see.
CHECK = """
    import json, os, subprocess, sys
    import numpy as np
    import scipy.linalg
    import threadpoolctl

    FRESH = (
        "import json, os, numpy, scipy.linalg, threadpoolctl; print(json.dumps(["
        "os.environ.get('OPENBLAS_NUM_THREADS'), sorted([i['filepath'], i['num_threads']] "
        "for i in threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas')]))"
    )

    def pools():
        info = threadpoolctl.threadpool_info()
        return sorted([i["filepath"], i["num_threads"]] for i in info if i["internal_api"] == "openblas")

    def check(where, out):
        rng = np.random.default_rng(0)
        a = rng.standard_normal((300, 300)) + 300 * np.eye(300)
        b = rng.standard_normal(300)
        x = scipy.linalg.solve(a, b)
        assert np.allclose(a @ x, b) and np.allclose(np.linalg.solve(a, b), x)
        mine = [os.environ.get("OPENBLAS_NUM_THREADS"), pools()]
        fresh = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, check=True)
        assert json.loads(fresh.stdout) == mine
        with open(out, "a") as fh:
            fh.write(json.dumps([where, sorted({n for _, n in mine[1]})]) + "\\n")
"""

SUITE = """
    import os
    import pytest
    import sklearn  # noqa: F401  (a Lightning user's suite imports it, or torchmetrics scipy)
    from check import check

    OUT = {out!r}

    def test_in_the_session():
        check("session", OUT)

    @pytest.mark.standalone
    def test_standalone():
        check("standalone", OUT)

    @pytest.mark.distributed(world_size=2)
    def test_distributed(dist):
        check(f"rank{{dist.rank}}", OUT)
"""


def records(out: Path) -> dict[str, list[int]]:
    return {where: sizes for where, sizes in map(json.loads, out.read_text().splitlines())}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("user", [None, "2"], ids=["openblas-default", "openblas-2"])
@pytest.mark.parametrize("path", ["session-fork", "fresh-zygote"])
def test_a_suite_that_imports_scipy_and_sklearn_keeps_its_warm_start(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, user: str | None, path: str
) -> None:
    for name in fresh_state.POOL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if user is not None:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", user)
    out = pytester.path / "out.jsonl"
    pytester.makepyfile(check=textwrap.dedent(CHECK))
    pytester.makepyfile(test_suite=textwrap.dedent(SUITE.format(out=str(out))))
    if path == "fresh-zygote":  # the session may not fork itself: the zygote preloads scipy
        pytester.makeconftest("import os\nSEEN = os.environ.get('RANK')\n")
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=280)
    result.assert_outcomes(passed=3)
    said = [line for line in result.stdout.lines if line.startswith("ddpkit:")]
    if path == "session-fork":
        assert said == []
    else:
        assert said == [
            "ddpkit: the warm start's zygote is a fresh interpreter: conftest read RANK while "
            "the session collected (each test's own value)."
        ]
    # As a fresh interpreter sizes them: OPENBLAS_NUM_THREADS first, else a rank's own
    # OMP_NUM_THREADS (one core each for two ranks), else every core.
    alone = min(int(user), CPUS) if user else CPUS
    rank = min(int(user), CPUS) if user else max(1, CPUS // 2)
    expected = {"session": [alone], "standalone": [alone], "rank0": [rank], "rank1": [rank]}
    assert records(out) == expected


# -- the fresh-interpreter zygote, seen from the warm start -------------------------------------

SIZES_A_POOL = """
import threadpoolctl
blas = threadpoolctl.ThreadpoolController().select(internal_api="openblas").lib_controllers
blas[0].set_num_threads(2)  # starts one pool thread now: a fork is not safe after it
"""

PROBE = """
    import sys
    PRELOADED = sorted(m for m in ("scipy.linalg", "sklearn", "sizes_a_pool") if m in sys.modules)
    from check import check

    def test_probe():
        assert PRELOADED == ["scipy.linalg", "sklearn"]
        check("probe", {out!r})
"""


@pytest.mark.timeout(300)
@pytest.mark.skipif(CPUS < 2, reason="one CPU: an OpenBLAS pool has no thread to start")
def test_the_zygote_preloads_scipy_and_still_leaves_out_an_import_that_starts_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in fresh_state.POOL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "check.py").write_text(textwrap.dedent(CHECK))
    (tmp_path / "sizes_a_pool.py").write_text(SIZES_A_POOL)
    out = tmp_path / "out.jsonl"
    (tmp_path / "test_probe.py").write_text(textwrap.dedent(PROBE.format(out=str(out))))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
    }
    said: list[str] = []
    warm = WarmStart(tmp_path, said.append)
    try:
        warm.collected(["torch", "numpy", "scipy.linalg", "sklearn", "sizes_a_pool"], env)
        zygote = warm.zygote_for(env)
        assert zygote is not None and zygote.info is not None, warm.off
        assert said == [
            "ddpkit: the warm start leaves sizes_a_pool to each test: in the zygote, importing "
            "sizes_a_pool: 1 native thread(s) started, and a fork is not safe then."
        ]
        assert zygote.info.hazard is None and not {"scipy", "sklearn"} & set(zygote.info.left)
        request = ForkRequest(
            args=("-p", "no:cacheprovider", "-q", str(tmp_path / "test_probe.py")),
            env=env,
            cwd=str(tmp_path),
            log=str(tmp_path / "probe.log"),
            fd_env={},
        )
        code = zygote.fork(request).wait(timeout=120)
        assert code == 0, (tmp_path / "probe.log").read_text()
        assert records(out) == {"probe": [CPUS]}
        pid = zygote.proc.pid
    finally:
        warm.close()
    assert not procs.is_running(pid)


# -- the pool sizes and the hint, as functions ----------------------------------------------------


@pytest.mark.parametrize(
    ("env", "cpus", "size"),
    [
        ({}, 8, 8),
        ({"OMP_NUM_THREADS": "2"}, 8, 2),
        ({"OPENBLAS_NUM_THREADS": "3", "OMP_NUM_THREADS": "2"}, 8, 3),
        ({"GOTO_NUM_THREADS": "5", "OMP_NUM_THREADS": "2"}, 8, 5),
        ({"OPENBLAS_DEFAULT_NUM_THREADS": "1"}, 8, 1),
        ({"OMP_NUM_THREADS": "1", "OPENBLAS_DEFAULT_NUM_THREADS": "4"}, 8, 1),
        ({"OPENBLAS_NUM_THREADS": "16"}, 8, 8),  # never more than the CPUs
        ({"OPENBLAS_NUM_THREADS": "0", "OMP_NUM_THREADS": "1"}, 8, 1),  # 0: unset
        ({"OPENBLAS_NUM_THREADS": "abc"}, 2, 2),  # atoi: not a number is unset
        ({"OPENBLAS_NUM_THREADS": " 4x"}, 8, 4),
    ],
)
def test_the_pool_size_is_openblas_own_rule(env: dict[str, str], cpus: int, size: int) -> None:
    assert fresh_state.fresh_pool_size(env, cpus) == size


def test_without_threadpoolctl_the_line_says_how_to_keep_the_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hazard = "importing scipy.linalg: 1 native thread(s) started"
    assert fresh_state.hint(hazard) == ""  # installed: a native thread is something else
    monkeypatch.setattr(fresh_state, "can_hold", lambda: False)
    assert "installing threadpoolctl" in fresh_state.hint(hazard)
    assert fresh_state.hint("importing x: a thread is running (poller)") == ""
