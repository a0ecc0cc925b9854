"""The two markers read into specs; malformed ones are errors that show the marker as written."""

from __future__ import annotations

import pytest

from ddpkit.errors import MisconfigurationError
from ddpkit.testing._markers import (
    DistributedSpec,
    StandaloneSpec,
    distributed_spec,
    resolve_timeout,
    standalone_spec,
)


def test_standalone_defaults_and_timeout() -> None:
    assert standalone_spec((), {}) == StandaloneSpec(timeout=None)
    assert standalone_spec((), {"timeout": 30}) == StandaloneSpec(timeout=30.0)
    assert standalone_spec((12.5,), {}) == StandaloneSpec(timeout=12.5)


def test_distributed_defaults_and_arguments() -> None:
    assert distributed_spec((), {}) == DistributedSpec(world_size=2, backend="gloo", timeout=None)
    assert distributed_spec((3,), {"timeout": 9}) == DistributedSpec(
        world_size=3, backend="gloo", timeout=9.0
    )
    assert distributed_spec((), {"world_size": 1, "backend": "nccl"}).backend == "nccl"


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (
            (),
            {"world_size": 0},
            r"distributed\(world_size=0\): world_size must be a positive "
            r"int, got 0\. Fix: world_size=2",
        ),
        ((), {"world_size": True}, r"world_size must be a positive int, got True"),
        ((), {"backend": "mpi"}, r"backend='mpi'\): backend must be one of gloo, nccl, got 'mpi'"),
        ((), {"timeout": -1}, r"timeout must be a positive number of seconds, got -1"),
        (
            (),
            {"ranks": 2},
            r"distributed\(ranks=2\): unknown argument ranks\. Fix: use "
            r"world_size, backend, timeout",
        ),
        ((2, "gloo"), {}, r"distributed\(2, 'gloo'\): only world_size may be positional"),
        ((2,), {"world_size": 2}, r"only world_size may be positional"),
    ],
)
def test_distributed_errors_name_the_marker_and_the_value(
    args: tuple[object, ...], kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(MisconfigurationError, match=match):
        distributed_spec(args, kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((), {"timeout": "10"}, r"standalone\(timeout='10'\): timeout must be a positive number"),
        ((), {"timeout": 0}, r"got 0\. Fix: timeout=60"),
        ((1, 2), {}, r"standalone\(1, 2\): only timeout may be positional"),
        ((), {"world_size": 2}, r"unknown argument world_size\. Fix: use timeout"),
    ],
)
def test_standalone_errors(args: tuple[object, ...], kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(MisconfigurationError, match=match):
        standalone_spec(args, kwargs)


def test_timeout_is_the_markers_else_the_suites() -> None:
    assert resolve_timeout(5.0, 120.0) == 5.0
    assert resolve_timeout(None, 120.0) == 120.0
    assert resolve_timeout(None, 0.0) is None  # pytest-timeout's "no timeout"
    assert resolve_timeout(None, None) is None
