"""One comparison case of the Lightning twin (hand-picked in test_same_as_lightning.py, generated
in test_grid_*.py): what both runs get, what they must refuse, and the check itself."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lightning_twin import run
from twin_compare import compare


@dataclass(frozen=True)
class Case:
    """``trainer``: Trainer keywords; ``calls``: lightning_twin.CALLS; ``spec``: run()'s other
    keywords (logs, module, callbacks, loader); ``refused``: the fragment (or fragments) both
    refusals' messages hold (None: nothing is refused); ``known``: twin_compare.APART differences this case
    compares; ``ignore``: effects left out, with the reason in the case's comment; ``skips``:
    calls that may start no stage (twin_compare.compare)."""

    trainer: dict[str, Any]
    calls: tuple[str, ...] = ("fit",)
    spec: dict[str, Any] = field(default_factory=dict)
    refused: str | tuple[str, ...] | None = None
    known: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    skips: tuple[str, ...] = ()


def check(case: Case, root: Path) -> None:
    """Runs the case under Lightning and ddpkit and fails with every difference."""
    lightning = run("lightning", root, list(case.calls), **case.spec, **case.trainer)
    ddpkit = run("ddpkit", root, list(case.calls), **case.spec, **case.trainer)
    differ = compare(lightning, ddpkit, refused=case.refused, known=case.known,
                     ignore=case.ignore, skips=case.skips)  # fmt: skip
    assert not differ, "\n".join(differ)
    if case.refused is None:
        assert lightning.seen, "the watching callback saw nothing"


#: (predicate over a case's parameters, the difference it meets): an xfail(strict=True) each
Known = list[tuple[Callable[[dict[str, Any]], bool], str]]


def params(cases: Iterable[tuple[str, dict[str, Any], Case]], known: Known) -> list[Any]:
    """pytest params of generated cases (id, the axes' values, the case), each case that a
    ``known`` predicate matches marked xfail(strict=True) with its reason. Every predicate must
    match one case at least: a stale one fails the collection."""
    out, used = [], set()
    for case_id, values, case in cases:
        reasons = [(i, reason) for i, (matches, reason) in enumerate(known) if matches(values)]
        used |= {i for i, _ in reasons}
        marks = (
            [pytest.mark.xfail(strict=True, reason="; ".join(r for _, r in reasons))]
            if reasons
            else []
        )
        out.append(pytest.param(case, id=case_id, marks=marks))
    stale = [reason for i, (_, reason) in enumerate(known) if i not in used]
    assert not stale, f"known differences no case meets: {stale}"
    return out
