"""Differences from Lightning already known (issue 33) that would show in most cases of the
twin comparison, each set apart so that it does not hide the other differences of those cases.

Every entry leaves exactly one difference out of both runs' effects; the case named ``known:
<entry>`` in tests/callbacks/test_same_as_lightning.py compares it all the same, as an
xfail(strict=True). When ddpkit is fixed, that case passes and fails as strict: remove its
entry here and its xfail there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Effects = dict[str, Any]
Drop = Callable[[Effects, Effects], None]


def _seen(hooks: tuple[str, ...], names: tuple[str, ...]) -> Drop:
    """Leaves ``names`` out of what the watching callback read at ``hooks`` (an entry's tool)."""

    def drop(lightning: Effects, ddpkit: Effects) -> None:
        for hook, _, values in (*lightning["seen"], *ddpkit["seen"]):
            if hook in hooks:
                for name in names:
                    values.pop(name, None)

    return drop


#: name -> what it leaves out of both runs (none left: every difference it set apart is fixed)
APART: dict[str, Drop] = {}
