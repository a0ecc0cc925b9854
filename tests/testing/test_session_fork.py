"""The warm start's first choice, end to end: the parent pytest forks itself after collection and
each rank runs the collected item — a fork that keeps nothing of the parent's output, gives each
rank its own tmp_path root, and gives way to a fresh-interpreter zygote (one line says why) where
it cannot be as good as a fresh ``pytest <node id>``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = ("-p", "ddpkit.testing.pytest_plugin", "-p", "no:cacheprovider", "-rA")

# What a rank finds out about the zygote it was forked from (its parent) and the zygote's parent.
WHERE = """
    import json, os

    def cmdline(pid):
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode().replace("\\0", " ").strip()

    def parent_of(pid):
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])

    def descriptors(pid):
        found = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            found.add((st.st_dev, st.st_ino))
        return found

    def where(out):
        zygote = os.getppid()
        session = parent_of(zygote)
        record = {
            "zygote": cmdline(zygote),
            "session": cmdline(session),
            "descriptors": sorted(descriptors(zygote)),
        }
        with open(out, "w") as fh:
            json.dump(record, fh)
"""

PROBE = """
    import pytest
    from where import where

    @pytest.mark.distributed(world_size=2)
    def test_where(dist):
        if dist.rank == 0:
            where({out!r})
"""


def probe(pytester: pytest.Pytester, tmp_path: Path, source: str = PROBE) -> tuple[dict[str, object], str, set[tuple[int, int]]]:  # fmt: skip
    """Run the probe in a pytest whose output goes to pipes, as in a terminal or CI: what the
    rank found, the session's output, and the pipes' identities."""
    out = tmp_path / "where.json"
    pytester.makepyfile(where=textwrap.dedent(WHERE))
    pytester.makepyfile(test_probe=textwrap.dedent(source.format(out=str(out))))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *PLUGIN, "-p", "no:xdist"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    pipe = os.fstat(proc.stdout.fileno()) if proc.stdout is not None else None
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0, output
    assert pipe is not None
    return json.loads(out.read_text()), output, {(pipe.st_dev, pipe.st_ino)}


@pytest.mark.timeout(150)
def test_the_zygote_is_the_session_forked_and_keeps_none_of_its_output(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    record, output, pipes = probe(pytester, tmp_path)
    assert record["zygote"] == record["session"], output  # a fork of the session
    assert "pytest" in str(record["session"])
    # Whoever reads pytest's output sees it end with pytest, not with the zygote (pytest's
    # capture and faulthandler each keep a copy of the descriptor: none of them is left).
    held = {(int(dev), int(ino)) for dev, ino in record["descriptors"]}  # type: ignore[attr-defined]
    assert held & pipes == set()
    assert "fresh interpreter" not in output


@pytest.mark.timeout(150)
def test_a_thread_in_the_session_makes_the_zygote_a_fresh_interpreter_and_says_why(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makeconftest(
        """
        import threading, time
        threading.Thread(target=time.sleep, args=(120,), name="poller", daemon=True).start()
        """
    )
    record, output, _ = probe(pytester, tmp_path)
    assert "ddpkit.testing._warm_start.zygote_server" in str(record["zygote"])
    assert (
        "ddpkit: the warm start's zygote is a fresh interpreter: in this pytest process, a "
        "thread is running (poller)." in output
    ), output


ENVIRONMENT = """
    import os
    import pytest

    AT_IMPORT = os.environ.get("EXPORTED")

    def test_a_exports_a_variable():
        os.environ["EXPORTED"] = "by test a"  # left set: every later test's process sees it

    @pytest.mark.distributed(world_size=2)
    def test_b_sees_it_as_a_fresh_interpreter_would(dist):
        assert os.environ["EXPORTED"] == "by test a"
        assert AT_IMPORT == "by test a"  # this module was imported by this test's own session
"""


@pytest.mark.timeout(150)
def test_a_variable_exported_after_collection_reaches_the_ranks_imports(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_env=textwrap.dedent(ENVIRONMENT))
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=120)
    result.assert_outcomes(passed=2)


BASETEMP = """
    import pytest

    def test_a_keeps_a_file(tmp_path, tmp_path_factory):
        (tmp_path / "kept").write_text("a")
        with open({paths!r}, "w") as fh:
            fh.write(str(tmp_path / "kept"))

    @pytest.mark.distributed(world_size=2)
    def test_b_has_a_root_of_its_own(dist, tmp_path):
        (tmp_path / f"rank{{dist.rank}}").write_text("b")
        assert {basetemp!r} not in str(tmp_path)

    def test_c_finds_the_file_of_a():
        with open({paths!r}) as fh:
            assert open(fh.read()).read() == "a"
"""


@pytest.mark.timeout(150)
def test_ranks_never_use_or_wipe_the_sessions_basetemp(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    basetemp = tmp_path / "basetemp"
    source = BASETEMP.format(paths=str(tmp_path / "paths"), basetemp=str(basetemp))
    pytester.makepyfile(test_basetemp=textwrap.dedent(source))
    result = pytester.runpytest_subprocess(*PLUGIN, f"--basetemp={basetemp}", timeout=120)
    result.assert_outcomes(passed=3)
    assert not list(basetemp.rglob("rank*"))


@pytest.mark.timeout(150)
def test_a_conftest_that_reads_rank_at_import_gets_each_ranks_own(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("import os\nRANK_AT_IMPORT = os.environ.get('RANK')\n")
    pytester.makepyfile(
        test_rank="""
        import pytest
        import conftest

        @pytest.mark.distributed(world_size=2)
        def test_own_rank(dist):
            assert conftest.RANK_AT_IMPORT == str(dist.rank)
        """
    )
    result = pytester.runpytest_subprocess(*PLUGIN, timeout=120)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "ddpkit: the warm start's zygote is a fresh interpreter: conftest read RANK while "
            "the session collected (each test's own value)."
        ]
    )


LIGHTNING = """
    import os
    import pytest
    from lightning_fabric.utilities.rank_zero import rank_zero_only as fabric_rank_zero_only
    from pytorch_lightning.utilities import rank_zero
    from torchmetrics.utilities import prints
    from where import where

    @pytest.mark.distributed(world_size=2)
    def test_where(dist):
        # What each rank's own import of Lightning and torchmetrics computes from its RANK and
        # LOCAL_RANK (one machine: the same number), not the session's 0.
        assert rank_zero.rank_zero_only.rank == dist.rank
        assert fabric_rank_zero_only.rank == dist.rank
        assert prints.rank_zero_only.rank == int(os.environ["LOCAL_RANK"]) == dist.rank
        if dist.rank == 0:
            where({out!r})
"""


@pytest.mark.timeout(150)
def test_a_suite_that_imports_lightning_forks_its_session_and_each_rank_has_its_rank(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytest.importorskip("pytorch_lightning")
    # Lightning's stack reads RANK and LOCAL_RANK while the conftest imports it (and fsspec,
    # which it imports, every variable there is: this session has PYTEST_CURRENT_TEST).
    pytester.makeconftest("import pytorch_lightning\nimport torchmetrics\n")
    record, output, _ = probe(pytester, tmp_path, LIGHTNING)
    assert record["zygote"] == record["session"], output  # a fork of the session
    assert "fresh interpreter" not in output, output
