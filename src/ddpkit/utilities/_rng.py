"""A process's random generators — Python's, NumPy's (when installed), torch's CPU one and the
current CUDA device's — as plain data: what a checkpoint keeps for each rank, so that a resumed
run draws the same dropout masks and shuffles as an uninterrupted one.

The state is a dict of tensors, ints, floats, strings and lists (``torch.load(weights_only=True)``
reads it back), and travels between ranks as JSON (:func:`encode` / :func:`decode`), never as a
pickle.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
from collections.abc import Iterator
from typing import Any

import torch


def numpy_or_none() -> Any:
    """NumPy, when it is installed (ddpkit does not depend on it); else None."""
    try:
        import numpy as np
    except ImportError:
        return None
    return np


def capture() -> dict[str, Any]:
    """This process's generator states, now."""
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "torch": torch.get_rng_state(),
        "cuda": None,
        "numpy": None,
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()  # the current device's
    np = numpy_or_none()
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        keys64 = torch.tensor(keys.astype("int64"))  # uint32 words, held as int64
        state["numpy"] = [kind, keys64, int(pos), int(has_gauss), float(cached)]
    return state


def restore(state: dict[str, Any]) -> None:
    """Set this process's generators to ``state`` (one :func:`capture` made)."""
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(i) for i in internal), gauss))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
    np = numpy_or_none()
    if state.get("numpy") is not None and np is not None:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        array = np.array(keys.tolist(), dtype=np.uint32)
        np.random.set_state((kind, array, int(pos), int(has_gauss), float(cached)))


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """The generators set back, on the way out, to what they were on the way in (Lightning's
    ``isolate_rng``, around its sanity check: what runs inside draws nothing from training)."""
    state = capture()
    try:
        yield
    finally:
        restore(state)


def _b64(tensor: torch.Tensor | None) -> str | None:
    return None if tensor is None else base64.b64encode(bytes(tensor.tolist())).decode()


def encode(state: dict[str, Any]) -> bytes:
    """``state`` as JSON bytes (to send to another rank)."""
    numpy = state.get("numpy")
    plain = {
        "python": state["python"],
        "torch": _b64(state["torch"]),
        "cuda": _b64(state.get("cuda")),
        "numpy": None if numpy is None else [numpy[0], numpy[1].tolist(), *numpy[2:]],
    }
    return json.dumps(plain).encode()


def _uint8(text: str | None) -> torch.Tensor | None:
    if text is None:
        return None
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8).clone()


def decode(data: bytes) -> dict[str, Any]:
    """What :func:`encode` made, back as a state."""
    plain = json.loads(data)
    numpy = plain["numpy"]
    return {
        "python": plain["python"],
        "torch": _uint8(plain["torch"]),
        "cuda": _uint8(plain["cuda"]),
        "numpy": None
        if numpy is None
        else [numpy[0], torch.tensor(numpy[1], dtype=torch.int64), *numpy[2:]],
    }
