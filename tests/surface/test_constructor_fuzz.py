"""A fuzz of every public constructor of ddpkit: ``Trainer``, ``DataModule``, every callback,
every logger, every plugin and accelerator (and ``ddpkit.lightning.Trainer``'s precision), with
wrong-typed, out-of-range and odd values — None, negatives, floats for ints, strings with NUL
bytes, empty strings, huge ints, nested containers. Each call builds an object or raises a ddpkit
error whose message quotes the call; never a raw Python error (``ValueError: embedded null
byte``, ``RuntimeError: No precision set``, a ``KeyError``, an ``AttributeError``, ...). What
builds goes into a ``Trainer`` the same way: a Trainer, or a ddpkit error. Nothing starts.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import tempfile
import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ddpkit
import ddpkit.accelerators
import ddpkit.callbacks
import ddpkit.loggers
import ddpkit.plugins
from ddpkit.errors import DDPKitError

try:  # imported at collection: Lightning's import sets an environment variable of torch's
    import pytorch_lightning as pl
except ImportError:  # pragma: no cover - the `lightning` extra is not installed
    pl = None

pytestmark = pytest.mark.timeout(600)

_ODD = [
    None, True, False, 0, 1, 2, -1, -2, 32, 10**30, -(10**30), 2**63, 32.0, 16.0, 1.5, -0.5, 0.0,
    float("nan"), float("inf"), -float("inf"), "", "x", "a\x00b", "\x00", "auto", "-1", "32",
    "16-mixed", "bf16", "min", "max", "step", "epoch", "00:00:00:01", "00:01", "x" * 300,
    b"bytes", [], [[]], [None], [1, "x"], {}, {"a": {}}, {"hours": -1}, {"hours": 1}, (1,),
    object(), timedelta(-1), timedelta(0), timedelta(seconds=1), torch.device("cpu"),
]  # fmt: skip
ODD = st.one_of(
    st.sampled_from(_ODD),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=2)), max_size=3),
    st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.integers()), max_size=2),
)


def _public_classes(module: Any) -> dict[str, type]:
    return {
        f"{module.__name__}.{name}": value
        for name in module.__all__
        if isinstance(value := getattr(module, name), type)
        and not issubclass(value, BaseException | torch.nn.Module)
        and not inspect.isabstract(value)
        and not issubclass(value, __import__("enum").Enum)
    }


CONSTRUCTORS: dict[str, type] = {
    "ddpkit.Trainer": ddpkit.Trainer,
    "ddpkit.DataModule": ddpkit.DataModule,
    **_public_classes(ddpkit.callbacks),
    **_public_classes(ddpkit.loggers),
    **_public_classes(ddpkit.plugins),
    **_public_classes(ddpkit.accelerators),
}
#: What a constructor needs to be built at all, where the fuzz leaves it out.
REQUIRED: dict[str, dict[str, Any]] = {
    "EarlyStopping": {"monitor": "val_loss"},
    "CSVLogger": {"save_dir": "logs"},
    "TensorBoardLogger": {"save_dir": "logs"},
    "Trainer": {"logger": False, "enable_progress_bar": False},
}


def _keywords(cls: type) -> list[str]:
    params = inspect.signature(cls).parameters.values()
    return [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@contextlib.contextmanager
def _elsewhere() -> Any:
    """In an empty folder of its own (a relative path the fuzz makes lands there)."""
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        yield


def _build(cls: type, kwargs: dict[str, Any]) -> Any:
    given = {**REQUIRED.get(cls.__name__, {}), **kwargs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(**given)


def _call(name: str, kwargs: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"


def _clear(
    name: str, kwargs: dict[str, Any], build: Callable[[], Any], also: tuple[type, ...] = ()
) -> Any:
    """The object built, or None after a ddpkit error that quotes the call (or one of ``also``)."""
    try:
        return build()
    except also:
        return None
    except DDPKitError as err:
        message = str(err)
        short = name.rpartition(".")[2]
        assert f"{short}(" in message or "Trainer(" in message, (_call(name, kwargs), message)
        return None
    except Exception as err:  # a raw Python error is the failure this test looks for
        pytest.fail(f"{_call(name, kwargs)} raised {type(err).__name__}: {err}")


def _in_a_trainer(value: Any) -> dict[str, Any]:
    if isinstance(value, ddpkit.loggers.Logger):
        return {"logger": value}
    if isinstance(value, ddpkit.callbacks.Callback):
        return {"callbacks": [value]}
    if isinstance(value, ddpkit.accelerators.Accelerator):
        return {"accelerator": value}
    if isinstance(value, ddpkit.DataModule | ddpkit.Trainer):
        return {}
    return {"plugins": [value]}


@st.composite
def calls(draw: st.DrawFn, cls: type) -> dict[str, Any]:
    names = _keywords(cls)
    chosen = draw(st.lists(st.sampled_from(names), max_size=3, unique=True)) if names else []
    return {name: draw(ODD) for name in chosen}


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_a_constructor_builds_or_refuses_with_the_call_quoted(name: str) -> None:
    cls = CONSTRUCTORS[name]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(kwargs=calls(cls))
    def check(kwargs: dict[str, Any]) -> None:
        with _elsewhere():
            built = _clear(name, kwargs, lambda: _build(cls, kwargs))
            if built is not None and cls is not ddpkit.Trainer:
                slot = _in_a_trainer(built)
                _clear("ddpkit.Trainer", slot, lambda: _build(ddpkit.Trainer, slot))

    check()


@given(kwargs=st.fixed_dictionaries({}, optional={"dirpath": ODD, "filename": ODD}))
@settings(max_examples=40, deadline=None)
@example(kwargs={"dirpath": "a\x00b"})
@example(kwargs={"filename": "ep\x00{epoch}"})
def test_paths_with_a_nul_byte_are_refused_with_the_call(kwargs: dict[str, Any]) -> None:
    with _elsewhere():
        _clear("ModelCheckpoint", kwargs, lambda: ddpkit.callbacks.ModelCheckpoint(**kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [{"precision": 32.0}, {"default_root_dir": "a\x00b"}, {"max_time": {"hours": 10**30}}],
)
def test_the_reported_calls(kwargs: dict[str, Any]) -> None:
    with _elsewhere():
        _clear("ddpkit.Trainer", kwargs, lambda: _build(ddpkit.Trainer, kwargs))


@pytest.mark.parametrize(
    "build",
    [
        lambda p: ddpkit.loggers.CSVLogger(p),
        lambda p: ddpkit.loggers.TensorBoardLogger(p),
        lambda p: ddpkit.callbacks.ModelCheckpoint(dirpath=p),
        lambda p: ddpkit.Trainer(default_root_dir=p, enable_progress_bar=False),
    ],
    ids=["CSVLogger", "TensorBoardLogger", "ModelCheckpoint", "Trainer"],
)
def test_a_folder_name_too_long_to_stat_builds(build: Callable[[str], Any]) -> None:
    """CI's fuzz found ``CSVLogger(save_dir='x' * 300)`` raising a bare ``OSError: [Errno 36]
    File name too long``: ``Path.exists`` raises it where ``os.path.exists`` says False.
    Lightning builds these without touching the disk; the first write reports the name."""
    with _elsewhere(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert build("x" * 300) is not None


_LIGHTNING_KEYWORDS = (
    [p for p in inspect.signature(pl.Trainer.__init__).parameters if p != "self"] if pl else []
)


@st.composite
def lightning_calls(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(
        st.lists(st.sampled_from(_LIGHTNING_KEYWORDS), min_size=1, max_size=2, unique=True)
    )
    return {name: draw(ODD) for name in names}


@pytest.mark.skipif(pl is None, reason="the `lightning` extra is not installed")
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(kwargs=lightning_calls())
@example(kwargs={"precision": 32.0})
@example(kwargs={"precision": "x"})
@example(kwargs={"limit_train_batches": ""})
@example(kwargs={"callbacks": "x"})
def test_lightnings_trainer_refuses_with_the_call(kwargs: dict[str, Any]) -> None:
    """ddpkit.lightning.Trainer passes a 2.x call to Lightning, which raised bare Python errors
    for some values (``RuntimeError: No precision set`` for ``precision=32.0``, a ``TypeError``
    comparing ``''`` with an int): now a ddpkit error quoting the call. Lightning's own
    ``MisconfigurationException`` (its message names the value) stays Lightning's."""
    from lightning_fabric.utilities.exceptions import MisconfigurationException

    from ddpkit.lightning import Trainer

    given = {"logger": False, "enable_progress_bar": False, **kwargs}
    environ = dict(os.environ)  # Trainer(deterministic=True) sets CUBLAS_WORKSPACE_CONFIG
    try:
        with _elsewhere():
            _clear("Trainer", kwargs, lambda: _build(Trainer, given), (MisconfigurationException,))
    finally:
        os.environ.clear()
        os.environ.update(environ)


def test_the_fuzz_reaches_every_public_constructor() -> None:
    assert {"ddpkit.Trainer", "ddpkit.callbacks.ModelCheckpoint", "ddpkit.loggers.CSVLogger",
            "ddpkit.plugins.DDPPlugin", "ddpkit.accelerators.CPUAccelerator"} <= set(CONSTRUCTORS)  # fmt: skip
    assert len(CONSTRUCTORS) >= 25
