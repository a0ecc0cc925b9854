"""A test's failure as pytest reports it, with the frames of ddpkit, torch and Python between the
test and the error left out (as :mod:`ddpkit._tracebacks` folds them for a script).

pytest shows every frame with its source: a ``trainer.fit`` that failed in ``training_step``
is twenty frames of ddpkit's loop and torch's module calls before the one line that matters. A
failure whose traceback passes through ddpkit keeps the frames of the test's own code (and the
innermost frame, where a library raised, unless the error is ddpkit's own); the error gets a
note saying how to see the rest: ``DDPKIT_VERBOSE=1`` (or pytest's ``--fulltrace``) keeps
every frame. A failure that never entered ddpkit is left exactly as pytest makes it.
"""

from __future__ import annotations

from types import TracebackType

import pytest

from ddpkit._tracebacks import VERBOSE_VARIABLE, fold_hint, library_of, verbose


def fold_failure(
    config: pytest.Config, excinfo: pytest.ExceptionInfo[BaseException]
) -> pytest.ExceptionInfo[BaseException] | None:
    """``excinfo`` with the library frames left out of its traceback (see the module
    docstring); None when it stays as it is. The frames go from the exception's own traceback
    (pytest rebuilds its entries from it), so the report and the exception agree."""
    if verbose() or config.getoption("fulltrace", False):
        return None
    raw: list[TracebackType] = []
    tb: TracebackType | None = excinfo.tb
    while tb is not None:
        raw.append(tb)
        tb = tb.tb_next
    libraries = [library_of(t.tb_frame.f_code.co_filename) for t in raw]
    if "ddpkit" not in libraries:
        return None
    value = excinfo.value
    if libraries[-1] is not None and not type(value).__module__.startswith("ddpkit."):
        libraries[-1] = None  # where a library raised: shown
    kept = [t for t, library in zip(raw, libraries, strict=True) if library is None]
    if not kept or len(kept) == len(raw):
        return None
    folded: TracebackType | None = None
    for t in reversed(kept):
        folded = TracebackType(folded, t.tb_frame, t.tb_lasti, t.tb_lineno)
    assert folded is not None
    value.__traceback__ = folded
    if fold_hint() not in str(value):  # a ChildFailedError already ends with it
        names = list(dict.fromkeys(n for n in libraries if n is not None))
        value.add_note(
            f"(ddpkit left out {len(raw) - len(kept)} frames of {' and '.join(names)} between "
            f"the test and the error: {VERBOSE_VARIABLE}=1 or --fulltrace shows them)"
        )
    return pytest.ExceptionInfo.from_exc_info((type(value), value, folded))
