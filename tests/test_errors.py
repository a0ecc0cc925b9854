"""The error tree: every exception pickles (it crosses process boundaries), and the failure
report reads root cause first."""

from __future__ import annotations

import pickle
import signal

import pytest

import ddpkit.errors as errors
from ddpkit.errors import ChildFailedError, LaunchError, MisconfigurationError, RankFailure

ROOT = RankFailure(
    rank=1, pid=4242, exitcode=1, traceback="Traceback ...\nValueError: boom", note=""
)
OTHER = RankFailure(rank=0, pid=4241, exitcode=-15, note="ended by ddpkit (SIGTERM)")

#: one instance of every exception and warning class errors.py exports
INSTANCES: dict[str, BaseException] = {
    "ChildFailedError": ChildFailedError([ROOT, OTHER], what="DDP (spawn launcher)"),
    "DDPKitDeprecationWarning": errors.DDPKitDeprecationWarning("use strategy='ddp'"),
    "DDPKitError": errors.DDPKitError("generic"),
    "DDPKitWarning": errors.DDPKitWarning("careful"),
    "LaunchError": LaunchError("MASTER_PORT=29500: taken"),
    "LightningOnlyAttributeError": errors.LightningOnlyAttributeError(
        "Net.manual_backward: not in ddpkit.Module. Fix: ddpkit.lightning.Trainer"
    ),
    "LightningOnlyImportError": errors.LightningOnlyImportError(
        "ddpkit.callbacks.RichProgressBar: not in ddpkit. Fix: Trainer(enable_progress_bar=True)"
    ),
    "LightningRemovedAttributeError": errors.LightningRemovedAttributeError(
        "Trainer.use_ddp: removed. Fix: trainer.strategy"
    ),
    "LightningUsageError": errors.LightningUsageError(
        "Trainer.add_argparse_args(_ArgumentGroup): pass an ArgumentParser"
    ),
    "LightningRemovedError": errors.LightningRemovedError(
        "ddpkit.lightning.loggers.TestTubeLogger: removed. Fix: TensorBoardLogger"
    ),
    "MisconfigurationError": MisconfigurationError("Trainer(devices=0): must be ≥ 1"),
    "MisconfigurationRuntimeError": errors.MisconfigurationRuntimeError(
        "Net.configure_optimizers returned 2 optimizers: one under automatic optimization"
    ),
    "UnknownKeywordError": errors.UnknownKeywordError("Timer(verbos=True): did you mean verbose?"),
    "UnusedParametersError": errors.UnusedParametersError("aux_head.weight took no part"),
}


def exception_names() -> list[str]:
    return sorted(
        name
        for name in errors.__all__
        if isinstance(getattr(errors, name), type)
        and issubclass(getattr(errors, name), BaseException)
    )


def test_every_exception_of_the_tree_has_a_pickling_case() -> None:
    assert exception_names() == sorted(INSTANCES)


@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_every_exception_pickles_round_trip(name: str) -> None:
    original = INSTANCES[name]
    copy = pickle.loads(pickle.dumps(original))
    assert type(copy) is type(original)
    assert str(copy) == str(original)
    assert copy.args == original.args


def test_child_failed_error_keeps_its_failures_across_pickling() -> None:
    original = INSTANCES["ChildFailedError"]
    assert isinstance(original, ChildFailedError)
    copy = pickle.loads(pickle.dumps(original))
    assert copy.failures == original.failures
    assert copy.root_cause == ROOT
    assert copy.what == "DDP (spawn launcher)"


def test_rank_failure_pickles() -> None:
    assert pickle.loads(pickle.dumps(ROOT)) == ROOT


def test_the_report_starts_with_the_root_cause_then_its_traceback_then_the_others() -> None:
    message = str(ChildFailedError([ROOT, OTHER], what="DDP (subprocess launcher)"))
    lines = message.splitlines()
    assert lines[0] == (
        "DDP (subprocess launcher) failed: rank 1 (pid 4242) is the root cause, exit code 1."
    )
    assert message.index("ValueError: boom") < message.index("rank 0 (pid 4241)")
    assert lines[-1] == "rank 0 (pid 4241): ended by ddpkit (SIGTERM)"


@pytest.mark.parametrize(
    ("exitcode", "note", "how"),
    [
        (1, "", "exit code 1"),
        (-signal.SIGSEGV, "", "killed by signal SIGSEGV"),
        (
            -signal.SIGKILL,
            "",
            "killed by signal SIGKILL (from outside the rank: often the out-of-memory killer)",
        ),
        (-15, "ended by ddpkit (SIGTERM)", "ended by ddpkit (SIGTERM)"),
        (None, "this process; then failed", "this process; then failed"),
        (None, "", "failed"),
    ],
)
def test_a_rank_failure_says_how_it_ended(exitcode: int | None, note: str, how: str) -> None:
    failure = RankFailure(rank=2, pid=7, exitcode=exitcode, note=note)
    assert failure.how == how
    assert failure.line() == f"rank 2 (pid 7): {how}"


def test_signal_name_is_none_for_an_exit_code() -> None:
    assert RankFailure(rank=0, pid=1, exitcode=2).signal_name is None
    assert RankFailure(rank=0, pid=1, exitcode=-signal.SIGTERM).signal_name == "SIGTERM"
