"""SIGINT/SIGTERM while a launcher supervises: the handler only sets a flag, the supervisor learns
of it at once through the wakeup pipe, and the previous handlers come back."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from ddpkit._runtime.process.signals import SignalFlag, exit_exception

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_the_handler_only_sets_a_flag(sig: signal.Signals) -> None:
    flag = SignalFlag()
    before = signal.getsignal(sig)
    try:
        with flag:
            assert flag.installed
            os.kill(os.getpid(), sig)  # neither raises nor ends the process
            assert flag.wait(10) == sig
        assert signal.getsignal(sig) is before
        assert not flag.installed
    finally:
        flag.close()


def test_a_supervisor_thread_is_woken_by_the_signal() -> None:
    flag = SignalFlag()
    seen: list[int | None] = []
    try:
        with flag:
            waiter = threading.Thread(target=lambda: seen.append(flag.wait(20)))
            waiter.start()
            os.kill(os.getpid(), signal.SIGTERM)
            waiter.join(20)
        assert seen == [signal.SIGTERM]
    finally:
        flag.close()


def test_the_first_signal_wins() -> None:
    flag = SignalFlag()
    try:
        with flag:
            os.kill(os.getpid(), signal.SIGTERM)
            flag.wait(10)
            os.kill(os.getpid(), signal.SIGINT)
            assert flag.wait(0.2) == signal.SIGTERM
    finally:
        flag.close()


def test_outside_the_main_thread_nothing_is_installed() -> None:
    flag = SignalFlag()
    result: list[bool] = []

    def enter() -> None:
        with flag:
            result.append(flag.installed)

    try:
        thread = threading.Thread(target=enter)
        thread.start()
        thread.join(10)
        assert result == [False]
    finally:
        flag.close()


def test_what_the_launching_process_raises() -> None:
    assert isinstance(exit_exception(signal.SIGINT), KeyboardInterrupt)
    term = exit_exception(signal.SIGTERM)
    assert isinstance(term, SystemExit)
    assert term.code == 143
