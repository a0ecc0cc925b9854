"""Under scripts/gpu_check.sh (``GPU_CHECK_NO_SKIPS=1``) a skipped GPU test fails the session: on
the lent GPU machine a skip is a check that did not happen, and a run of skips is no pass."""

from __future__ import annotations

import os

import pytest

_SKIPPED: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _SKIPPED.append(report.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("GPU_CHECK_NO_SKIPS") != "1":
        return
    if _SKIPPED or session.testscollected == 0:
        names = ", ".join(_SKIPPED) or "no test collected"
        print(f"\ngpu_check: {len(_SKIPPED)} GPU test(s) skipped ({names}): a skip is no pass.")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
