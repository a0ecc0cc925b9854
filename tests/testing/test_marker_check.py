"""ddpkit's markers in a session without ddpkit's plugin: one error that names the plugin, from
the check pytest loads wherever ddpkit is installed (its ``pytest11`` entry point); and nothing
at all in a session that does not use them, or loads the plugin, or has markers of its own.

The sessions are real pytest runs in fresh interpreters (pytester), which load the installed
entry point as any user's session would.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

PLAIN = ("-p", "no:cacheprovider")
FIX = (
    'Fix: pytest -p ddpkit.testing.pytest_plugin, or load it for every run: addopts = "-p '
    'ddpkit.testing.pytest_plugin" under [tool.pytest.ini_options] in pyproject.toml (or '
    'pytest_plugins = ["ddpkit.testing.pytest_plugin"] in the top conftest.py).'
)

DIST = """
    import pytest

    @pytest.mark.distributed(world_size=2)
    def test_all_reduce(dist):
        pass

    def test_plain():
        pass
"""

STANDALONE = """
    import pytest
    import ddpkit

    @pytest.mark.standalone
    def test_fit():
        pass
"""


def _write(pytester: pytest.Pytester, **files: str) -> None:
    pytester.makepyfile(**{name: textwrap.dedent(text) for name, text in files.items()})


def test_the_check_is_an_installed_entry_point_that_imports_no_torch() -> None:
    found = [e for e in entry_points(group="pytest11") if e.name == "ddpkit_marker_check"]
    assert [e.value for e in found] == ["ddpkit.testing.marker_check"]
    code = (
        "import sys, ddpkit.testing.marker_check; "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'ddpkit'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "ddpkit", "ddpkit.__about__", "ddpkit.testing", "ddpkit.testing.marker_check"
    ]  # fmt: skip


@pytest.mark.timeout(120)
def test_distributed_without_the_plugin_is_one_error_naming_it(pytester: pytest.Pytester) -> None:
    _write(pytester, test_dist=DIST)
    result = pytester.runpytest_subprocess(*PLAIN, timeout=100)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert (
        "ERROR: test_dist.py::test_all_reduce is marked @pytest.mark.distributed, which ddpkit's "
        "pytest plugin runs (in processes of their own, with the dist fixture), but the plugin "
        f"is not loaded. {FIX}"
    ) in err
    assert "fixture 'dist' not found" not in result.stdout.str() + err
    # With --strict-markers pytest refuses the marker first: the same fix is appended.
    result = pytester.runpytest_subprocess(*PLAIN, "--strict-markers", timeout=100)
    assert (
        "'distributed' not found in `markers` configuration option\nddpkit: "
        "@pytest.mark.distributed is ddpkit's, and its pytest plugin, which declares it, is not "
        f"loaded. {FIX}"
    ) in result.stdout.str()


@pytest.mark.timeout(120)
def test_standalone_in_a_suite_that_uses_ddpkit(pytester: pytest.Pytester) -> None:
    _write(pytester, test_a=STANDALONE, test_b=STANDALONE, test_c=STANDALONE, test_d=STANDALONE)
    result = pytester.runpytest_subprocess(*PLAIN, timeout=100)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: test_a.py::test_fit, test_b.py::test_fit, test_c.py::test_fit and 1 more are "
         "marked @pytest.mark.standalone, which ddpkit's pytest plugin runs *"]
    )  # fmt: skip


OWN_MARKERS = """
    import pytest

    @pytest.mark.distributed
    def test_uses_its_own_marker():
        pass

    @pytest.mark.standalone
    def test_and_another():
        pass
"""


@pytest.mark.timeout(120)
def test_sessions_that_do_not_use_ddpkits_markers_are_left_alone(
    pytester: pytest.Pytester,
) -> None:
    # A marker of the suite's own (declared in its ini), one it never declared but that is no
    # ddpkit's (no dist fixture, no ddpkit imported), and the plugin loaded: nothing changes.
    _write(pytester, test_own=OWN_MARKERS)
    pytester.makeini("[pytest]\nmarkers =\n    distributed: the suite's own\n")
    result = pytester.runpytest_subprocess(*PLAIN, timeout=100)
    result.assert_outcomes(passed=2)
    _write(pytester, test_dist=DIST)
    result = pytester.runpytest_subprocess(
        *PLAIN, "-p", "ddpkit.testing.pytest_plugin", "-k", "plain", timeout=100
    )
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess(*PLAIN, "-p", "no:ddpkit_marker_check", timeout=100)
    result.stdout.fnmatch_lines(["*fixture 'dist' not found*"])  # pytest's own, when turned off
