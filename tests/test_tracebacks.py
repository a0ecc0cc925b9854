"""Tracebacks as a user reads them: their own frames kept, each run of ddpkit's, torch's and
Python's folded into one line, every frame back with DDPKIT_VERBOSE=1."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import pytest
import torch

from ddpkit._tracebacks import VERBOSE_VARIABLE, fold, fold_hint, library_of, verbose
from ddpkit.errors import MisconfigurationError


def _user_code_through_torch() -> None:
    # torch's module call between two frames of this file, as a training_step is called
    class Boom(torch.nn.Module):
        def forward(self) -> None:
            raise ValueError("bad batch 3")

    Boom()()


def _raised(fn: object) -> BaseException:
    try:
        fn()  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def test_library_frames_are_folded_and_the_users_kept() -> None:
    exc = _raised(_user_code_through_torch)
    shown = fold(exc, keep_all=False)
    lines = shown.text.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: bad batch 3"
    assert shown.folded >= 2
    assert f"  ... {shown.folded} frames of torch" in lines
    assert not any("torch/nn/modules" in line for line in lines)
    assert sum("test_tracebacks.py" in line for line in lines) == 3  # _raised, the call, forward
    assert shown.where.endswith(', in forward: raise ValueError("bad batch 3")'), shown.where
    assert "test_tracebacks.py:" in shown.where


def test_every_frame_with_keep_all_and_the_verbose_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    exc = _raised(_user_code_through_torch)
    whole = "".join(traceback.format_exception(exc))
    assert fold(exc, keep_all=True).text == whole
    monkeypatch.setenv(VERBOSE_VARIABLE, "1")
    assert verbose()
    assert fold(exc).text == whole and fold(exc).folded == 0


def test_where_a_library_raised_stays_unless_the_error_is_ddpkits() -> None:
    loss = torch.nn.functional.cross_entropy
    exc = _raised(lambda: loss(torch.zeros(2, 3), torch.zeros(5).long()))
    frames = [line for line in fold(exc, keep_all=False).text.splitlines() if "File" in line]
    assert "torch/nn/functional.py" in frames[-1]  # where torch raised: shown
    assert "test_tracebacks.py" in frames[-2]

    def refuse() -> None:
        from ddpkit.connector import Flags, resolve
        from ddpkit.testing import make_probe

        resolve(Flags.of(devices=0), make_probe())

    ours = _raised(refuse)
    assert isinstance(ours, MisconfigurationError)
    text = fold(ours, keep_all=False).text
    assert "ddpkit/connector" not in text  # ddpkit's own error: its message says it all
    assert text.splitlines()[-2].strip().startswith("... ")


def test_a_chain_keeps_its_order_and_its_joining_line() -> None:
    def chained() -> None:
        try:
            _user_code_through_torch()
        except ValueError as err:
            raise RuntimeError("while training") from err

    text = fold(_raised(chained), keep_all=False).text
    assert (
        text.index("ValueError: bad batch 3")
        < text.index("The above exception was the direct cause")
        < text.index("RuntimeError: while training")
    )


def test_files_by_library() -> None:
    import ddpkit

    assert library_of(str(Path(ddpkit.__file__).parent / "trainer" / "loop.py")) == "ddpkit"
    assert library_of(torch.__file__) == "torch"
    assert library_of(contextlib.__file__) == "Python"
    assert library_of("<frozen runpy>") == "Python"
    assert library_of(__file__) is None
    assert library_of(pytest.__file__) is None  # an installed package of the user's


def test_an_uncaught_error_after_a_launch_prints_folded(tmp_path: Path) -> None:
    """The folding hook a launcher installs prints what Python would, folded, and ends with the
    line that says how to see every frame; a hook the user set is left alone."""
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent("""
        import sys, torch
        from ddpkit._tracebacks import install_folding_hook
        if sys.argv[1] == "own":
            sys.excepthook = lambda *a: print("the user's hook", file=sys.stderr)
        install_folding_hook()
        class Boom(torch.nn.Module):
            def forward(self):
                raise ValueError("bad batch 3")
        Boom()()
    """)
    )
    run = [sys.executable, str(script)]
    folded = subprocess.run([*run, "fold"], capture_output=True, text=True, check=False)
    lines = folded.stderr.splitlines()
    assert lines[-2:] == ["ValueError: bad batch 3", fold_hint()], folded.stderr
    assert "torch/nn/modules" not in folded.stderr
    own = subprocess.run([*run, "own"], capture_output=True, text=True, check=False)
    assert own.stderr == "the user's hook\n"
