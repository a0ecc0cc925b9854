"""The generated grid, several stages on one Trainer: every pair of fit / validate / test / predict
in turn (a fit twice, a validate before the fit, ...) and a covering sample of three, under a few
loop settings, plus a fit resumed from the checkpoints ModelCheckpoint writes at each point of the
loop — run by Lightning 2.x and by ddpkit, every effect compared (each stage must start on both
sides: twin_compare.missing_stages)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from twin_case import Case, Known, check, params
from twin_grid import covering

CALLS = ["fit", "validate", "test", "predict", "test_verbose"]
#: the loop settings, rotated over the sequences
SETTINGS: list[dict[str, Any]] = [
    {"max_epochs": 1},
    {"max_epochs": 2, "limit_train_batches": 2},
    {"max_steps": 3},
    {
        "max_epochs": 2,
        "callbacks": [("ModelCheckpoint", {"monitor": "val_loss", "save_last": True})],
    },
]


def sequences() -> list[tuple[str, ...]]:
    pairs = list(itertools.product(CALLS[:4], repeat=2))
    triples = covering({"first": CALLS, "second": CALLS, "third": CALLS}, seed=5)
    return [*pairs, *(tuple(t.values()) for t in triples)]


def _case(calls: tuple[str, ...], settings: dict[str, Any]) -> Case:
    trainer = {k: v for k, v in settings.items() if k != "callbacks"}
    spec = {"callbacks": settings["callbacks"]} if "callbacks" in settings else {}
    return Case(trainer, calls, spec)


#: a fit resumed (a new Trainer, max_epochs=3) from ModelCheckpoint's last file of a one-epoch fit
#: (4 batches an epoch), written where these keywords make it write
RESUMES: dict[str, dict[str, Any]] = {
    "at the training epoch's end": {"save_last": True},
    "at the validation's end": {"save_last": True, "save_on_train_epoch_end": False},
    "at the training's end": {"save_last": True, "every_n_epochs": 2, "save_top_k": -1},
    "within the epoch": {"save_last": True, "every_n_train_steps": 3, "save_top_k": -1},
    "a link": {"save_last": "link", "save_top_k": -1},
}


def cases() -> list[tuple[str, dict[str, Any], Case]]:
    out = []
    for i, calls in enumerate(sequences()):
        settings = SETTINGS[i % len(SETTINGS)]
        values = {"calls": calls, "settings": settings, "resume": None}
        out.append(("-".join(calls) + f"[{i % len(SETTINGS)}]", values, _case(calls, settings)))
    for name, keywords in RESUMES.items():
        case = Case(
            {"max_epochs": 3},
            ("fit_one_epoch", "resume", "test"),
            {"callbacks": [("ModelCheckpoint", keywords)]},
        )
        out.append((f"resume {name}", {"calls": case.calls, "settings": {}, "resume": name}, case))
    return out


#: what ddpkit still does otherwise (issue 33): (the rows it shows in, the difference)
KNOWN: Known = [
    (
        lambda row: row["resume"] == "at the validation's end",
        "a fit resumed from a checkpoint written at the epoch's validation: Lightning resumes "
        "inside that epoch and runs its on_train_epoch_end first; ddpkit counts the epoch as "
        "done and starts the next one (docs/flags.md, Differences)",
    ),
    (
        lambda row: row["resume"] == "within the epoch",
        "a fit resumed within an epoch: ddpkit reads and skips the batches the epoch trained "
        "before the checkpoint (the same batches as the uninterrupted run); Lightning starts "
        "the loader afresh and trains its first batches (docs/flags.md, Differences)",
    ),
]


@pytest.mark.parametrize("the_case", params(cases(), KNOWN))
def test_stages_as_in_lightning(tmp_path: Path, the_case: Case) -> None:
    check(the_case, tmp_path)
