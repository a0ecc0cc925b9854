"""The command line of an isolated test's fresh interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ddpkit.testing._standalone import forwarded_args, node_argument, pytest_args, pytest_command


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-p", "myplugin", "tests/x.py"], ["-p", "myplugin"]),
        (["-pmyplugin", "-p=no:foo"], ["-p", "myplugin", "-p", "no:foo"]),
        (["--override-ini=timeout=5", "-o", "a=b"], ["-o", "timeout=5", "-o", "a=b"]),
        (
            ["-W", "error", "--pythonwarnings=ignore::UserWarning"],
            ["-W", "error", "-W", "ignore::UserWarning"],
        ),
        (
            ["--import-mode", "importlib", "--confcutdir=/r"],
            ["--import-mode", "importlib", "--confcutdir", "/r"],
        ),
        (
            ["--strict-markers", "--runxfail", "--ddpkit-strict-leaks", "--noconftest"],
            ["--strict-markers", "--runxfail", "--ddpkit-strict-leaks", "--noconftest"],
        ),
        # selection, output, xdist and capture options stay with the parent
        (
            [
                "-k",
                "fit",
                "-m",
                "slow",
                "-x",
                "-v",
                "-n",
                "2",
                "--dist",
                "load",
                "-s",
                "--basetemp=/tmp/b",
                "--lf",
                "tests/",
            ],
            [],
        ),
        (["-p"], []),  # cut short: nothing to forward
    ],
)
def test_forwarded_args(args: list[str], expected: list[str]) -> None:
    assert forwarded_args(args) == expected


def test_node_argument_has_an_absolute_file_part() -> None:
    path = Path("/repo/tests/test_x.py")
    assert node_argument("tests/test_x.py::test_fit[2]", path) == f"{path}::test_fit[2]"
    assert node_argument("tests/test_x.py::TestA::test_b[a::b]", path) == (
        f"{path}::TestA::test_b[a::b]"
    )
    assert node_argument("tests/test_x.py", path) == str(path)


def test_pytest_command() -> None:
    args = pytest_args(
        node="/repo/t.py::test_a",
        rootdir=Path("/repo"),
        inifile=Path("/repo/pyproject.toml"),
        forwarded=["-p", "mine"],
        xdist=True,
    )
    assert pytest_command(args) == [
        sys.executable, "-m", "pytest", "--rootdir=/repo", "--config-file=/repo/pyproject.toml",
        "-p", "ddpkit.testing.pytest_plugin", "-p", "no:cacheprovider", "--capture=tee-sys",
        "-n", "0", "-p", "mine", "/repo/t.py::test_a",
    ]  # fmt: skip
    bare = pytest_args(
        node="/r/t.py::test_a", rootdir=Path("/r"), inifile=None, forwarded=[], xdist=False
    )
    assert "-n" not in bare
    assert not any(a.startswith("--config-file") for a in bare)
    assert bare[-1] == "/r/t.py::test_a"
