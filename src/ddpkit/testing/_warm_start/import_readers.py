"""The installed modules known to read a per-rank variable while they are imported, and how a
process forked from a zygote that imported them gets the values its own import would compute.

A fork holds what the zygote's imports computed from the zygote's environment. For a variable
that is the same in every test process that is what a fresh interpreter computes too; for one
that differs from rank to rank (``RANK``, ``LOCAL_RANK``, ...) it is not, and such a module is
left to each test (:mod:`~ddpkit.testing._warm_start.preload`), or keeps the session from
forking itself (:mod:`~ddpkit.testing._warm_start.session_fork`) — which costs every Lightning
user's suite the warm start, since Lightning's stack reads both at import, for one value each:

- ``lightning_fabric.utilities.rank_zero`` (also ``lightning.fabric.utilities.rank_zero`` in the
  unified ``lightning`` package; ``pytorch_lightning.utilities.rank_zero`` re-exports it) sets
  ``rank_zero_only.rank`` to ``_get_rank() or 0`` (``RANK``, ``LOCAL_RANK``, ``SLURM_PROCID``,
  ``JSM_NAMESPACE_RANK``, the first one set), unless it was set before;
- ``torchmetrics.utilities.prints`` sets its own ``rank_zero_only.rank`` to ``LOCAL_RANK`` or 0.

And one module reads every variable there is, ``RANK`` included when it is set, yet keeps only
its own: ``fsspec.config`` (which Lightning imports) looks for ``FSSPEC_*`` settings.

These are every read of a per-test variable that importing pytorch_lightning, lightning_fabric,
lightning_utilities and torchmetrics makes (tests/testing/test_import_readers.py checks that
list against the installed versions). For the modules listed here the read is let through, and
each test process, once it has its own environment, sets the value again from it
(:func:`recompute`), with the module's own function where it has one. A value that something
changed after the import (a conftest that set ``rank_zero_only.rank = 0``) is left as it is. A
read of any other per-test variable, or by any other module, is still what it was: a reason.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any


def _lightning_rank(module: Any) -> int:
    # The module's own line: rank_zero_only.rank = getattr(rank_zero_only, "rank", _get_rank() or 0)
    return int(module._get_rank() or 0)


def _torchmetrics_rank(module: Any) -> int:
    # torchmetrics.utilities.prints: int(os.environ.get("LOCAL_RANK", 0)); it has no function.
    return int(os.environ.get("LOCAL_RANK", 0))


@dataclass(frozen=True)
class ImportReader:
    """One module whose import reads ``variables`` and keeps one value computed from them in
    ``rank_zero_only.rank``."""

    module: str
    variables: frozenset[str]
    compute: Callable[[ModuleType], int]
    """The value the module's import computes from ``os.environ`` as it is now."""


_LIGHTNING_KEYS = frozenset({"RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"})

KNOWN = (
    ImportReader("lightning_fabric.utilities.rank_zero", _LIGHTNING_KEYS, _lightning_rank),
    ImportReader("lightning.fabric.utilities.rank_zero", _LIGHTNING_KEYS, _lightning_rank),
    ImportReader("torchmetrics.utilities.prints", frozenset({"LOCAL_RANK"}), _torchmetrics_rank),
)
_BY_MODULE = {reader.module: reader for reader in KNOWN}
#: Modules that read every variable while they are imported and keep only their own.
_KEEP_THEIR_OWN = frozenset({"fsspec.config"})

# Frames between a reader and the read: os.getenv, Mapping.get, the environ classes (and the
# testing modules that wrap os.environ).
_PASSING = frozenset(
    {
        "os",
        "collections.abc",
        "_collections_abc",
        __name__,
        "ddpkit.testing._warm_start.preload",
        "ddpkit.testing._warm_start.session_fork",
    }
)


def reader_of(depth: int = 1) -> str:
    """The module that reads a variable, seen from a frame of the ``os.environ`` wrapper that
    saw the read (``depth`` frames above this call), through the frames in between."""
    frame: Any = sys._getframe(depth + 1)
    while frame is not None and frame.f_globals.get("__name__") in _PASSING:
        frame = frame.f_back
    return "?" if frame is None else str(frame.f_globals.get("__name__", "?"))


def is_known_read(reader: str, key: str) -> bool:
    """Whether ``reader`` reading ``key`` at import is one of the reads each test process
    computes again (:func:`recompute`)."""
    if reader in _KEEP_THEIR_OWN:
        return True
    known = _BY_MODULE.get(reader)
    return known is not None and key in known.variables


#: A known reader imported in this process, whose value is still what its import computed.
Held = tuple[ImportReader, ModuleType]


def held() -> list[Held]:
    """In the zygote's environment, before a test process takes its own: the known readers this
    process imported whose value is still the one their import computed from it."""
    found = []
    for reader in KNOWN:
        module = sys.modules.get(reader.module)
        if module is None:
            continue
        try:
            if getattr(module.rank_zero_only, "rank", None) == reader.compute(module):
                found.append((reader, module))
        except (AttributeError, TypeError, ValueError):
            continue  # another version of the module, or a value that is not a rank: left as is
    return found


def recompute(readers: Sequence[Held]) -> None:
    """In a test process with its own environment: each value as its own import computes it."""
    for reader, module in readers:
        module.rank_zero_only.rank = reader.compute(module)


def forget(dropped: Iterable[str]) -> None:
    """After an import that failed and whose modules ``dropped`` were forgotten: a known reader
    among them may have set the value on an object that stays (Lightning's is
    ``lightning_utilities``' ``rank_zero_only``); unset it, as it was before, so that the test's
    own import of the reader computes it again."""
    for name in dropped:
        reader, module = _BY_MODULE.get(name), sys.modules.get(name)
        if reader is not None and module is not None:
            with contextlib.suppress(AttributeError):
                del module.rank_zero_only.rank
