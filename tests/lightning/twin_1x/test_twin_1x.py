"""Lightning 1.x twins: the same unchanged 1.x script run on real Lightning 1.9.5 and under
``python -m ddpkit.lightning``, and what each run did compared (``twin.py``).

ddpkit.lightning claims 1.x's semantics; these tests hold it to a real 1.x rather than to what
its authors remember of one. ``scripts/train_1x.py`` spans the features a 1.x project uses, chosen
on its command line: :data:`AXES`. :data:`GRID` covers every pair of two axes' values (a greedy
pairwise cover); a default session runs :data:`DEFAULT`, the fewest of its cases that use every
value of every axis once, and ``DDPKIT_ALL_TWINS=1`` runs the whole grid (as
``DDPKIT_ALL_PROJECTS`` does for tests/lightning/projects). Beside the grid: 1.9's
``LightningCLI`` with its ``fit`` and ``test`` subcommands, two runs on two processes (spawn, and
the ``DDPPlugin`` subprocess launcher on ddpkit's side), 1.9's own callback signatures, and a run
whose sides differ on purpose, to show the comparison can fail.

A difference ddpkit documents is normalised before the comparison (``twin.DELIBERATE``, each
citing its line of the docs). A difference that is a ddpkit defect is one of :data:`DEFECTS`: the
cases it shows in are ``xfail(strict=True, raises=KnownDefect)``, so that they fail once it is
fixed, and every other field is still compared in them (an unexplained difference raises an
``AssertionError``, which such an xfail does not swallow). A 1.x feature ddpkit refuses on purpose
is one of :data:`REFUSALS`: the case checks that ddpkit refuses it, naming the fix.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from twin import DEVICES, PL19, Effects, Twin, differences, normalise, run_side, run_twin

pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")
if not (PL19 / "pytorch_lightning").is_dir():
    pytest.skip(
        f"Lightning 1.9.5 is not in {PL19}: scripts/setup.sh test installs it",
        allow_module_level=True,
    )

#: The features of ``scripts/train_1x.py``, one axis each: the values its options take.
AXES: dict[str, list[str]] = {
    "optim": ["sgd", "sched_step", "sched_epoch", "warmup",
              "gan", "gan_freq", "gan_sched", "gan_freq_sched", "gan_step"],
    "trainer": ["plain", "accumulate", "clip", "limits", "max_steps", "val_interval",
                "val_every", "deterministic"],
    "callbacks": ["none", "ckpt", "es", "lrmon", "ckpt,es,lrmon"],
    "epoch_end": ["none", "tensor", "dict", "none_step"],
    "logging": ["default", "epoch", "step_epoch", "sync"],
    "hparams": ["plain", "module"],
    "data": ["loaders", "datamodule"],
}  # fmt: skip
GANS = {"gan", "gan_freq", "gan_sched", "gan_freq_sched", "gan_step"}

#: Each ``trainer`` value as the Trainer keywords it passes (1.x's argparse API reads them).
TRAINER_FLAGS: dict[str, list[str]] = {
    "plain": ["--max_epochs", "2"],
    "accumulate": ["--max_epochs", "2", "--accumulate_grad_batches", "2"],
    "clip": ["--max_epochs", "2", "--gradient_clip_val", "0.5"],
    "limits": ["--max_epochs", "2", "--limit_train_batches", "3", "--limit_val_batches", "2"],
    "max_steps": ["--max_epochs", "4", "--max_steps", "12"],
    "val_interval": ["--max_epochs", "2", "--val_check_interval", "0.5"],
    "val_every": ["--max_epochs", "3", "--check_val_every_n_epoch", "2"],
    "deterministic": ["--max_epochs", "2", "--deterministic_run", "--seed", "11"],
}

Case = dict[str, str]


def allowed(case: Case) -> bool:
    """Combinations whose twins cannot agree by what ddpkit documents: with several optimizers
    ``max_steps`` counts batches (docs/lightning.md: "``trainer.global_step`` counts batches, as
    in Lightning 1.0–1.5"), where 1.6–1.9 counted optimizer steps, so the two sides train for
    different lengths."""
    return not (case.get("optim") in GANS and case.get("trainer") == "max_steps")


def _pairs(case: Case) -> set[tuple[str, str, str, str]]:
    return {(a, case[a], b, case[b]) for a, b in itertools.combinations(AXES, 2)}


def _gain(case: Case, axis: str, value: str, uncovered: set[tuple[str, str, str, str]]) -> int:
    """How many uncovered pairs ``case`` covers with ``axis`` set to ``value``."""
    trial = {**case, axis: value}
    if not allowed(trial):
        return -1
    return sum(
        1
        for other, v in case.items()
        if (axis, value, other, v) in uncovered or (other, v, axis, value) in uncovered
    )


def pairwise(axes: dict[str, list[str]]) -> list[Case]:
    """Cases that hold every allowed pair of two axes' values at least once: each case starts
    from the first pair still uncovered and takes, axis by axis, the value covering most."""
    uncovered = {
        (a, x, b, y)
        for a, b in itertools.combinations(axes, 2)
        for x in axes[a]
        for y in axes[b]
        if allowed({a: x, b: y})
    }
    cases: list[Case] = []
    while uncovered:
        a, x, b, y = min(uncovered, key=lambda p: (list(axes).index(p[0]), p))
        case = {a: x, b: y}
        for axis in axes:
            if axis not in case:
                case[axis] = max(axes[axis], key=lambda v: _gain(case, axis, v, uncovered))
        ordered = {axis: case[axis] for axis in axes}
        cases.append(ordered)
        uncovered -= _pairs(ordered)
    return cases


def each_choice(cases: list[Case]) -> list[Case]:
    """The fewest of ``cases`` (greedily) that hold every value of every axis."""
    wanted = {(axis, v) for axis, values in AXES.items() for v in values}
    chosen: list[Case] = []
    while wanted:
        best = max(cases, key=lambda c: len(wanted & set(c.items())))
        chosen.append(best)
        wanted -= set(best.items())
    return chosen


GRID = pairwise(AXES)
DEFAULT = each_choice(GRID)


def case_id(case: Case) -> str:
    return "-".join(v.replace(",", "+") for v in case.values())


def arguments(case: Case) -> list[str]:
    """``scripts/train_1x.py``'s command line for ``case``, device flags aside."""
    callbacks = "" if case["callbacks"] == "none" else case["callbacks"]
    return [
        "--effects", "{effects}", "--log_every_n_steps", "1",
        "--optim", case["optim"], "--epoch_end", case["epoch_end"],
        "--logging", case["logging"], "--callbacks", callbacks,
        "--hparams", case["hparams"], "--data", case["data"],
        *TRAINER_FLAGS[case["trainer"]],
    ]  # fmt: skip


class KnownDefect(Exception):
    """A difference that one of :data:`DEFECTS` explains: what an xfail of that defect expects."""


@dataclass(frozen=True)
class Defect:
    """A ddpkit defect: the cases it shows in, and how: a field masked on both sides, or the
    line ddpkit's run fails with."""

    reason: str
    shows_in: Callable[[Case], bool]
    mask: Callable[[Effects, Effects], None] | None = None
    crash: str | None = None


#: None known: the six the twins found first (on_train_batch_end's and training_epoch_end's
#: outputs with several optimizers, LearningRateMonitor under a 1.x GAN's schedulers, callbacks
#: restored by test(ckpt_path=...), 1.9's required dataloader_idx, LightningCLI's --ckpt_path)
#: are fixed, and their cases compare whole.
DEFECTS: dict[str, Defect] = {}


@dataclass(frozen=True)
class Refusal:
    """A 1.x feature ddpkit refuses on purpose: the cases, what the refusal says, and where
    ddpkit documents it."""

    applies: Callable[[Case], bool]
    message: str
    doc: str


REFUSALS: list[Refusal] = [
    Refusal(
        lambda case: case.get("optim") in GANS and case.get("trainer") == "accumulate",
        "accumulate_grad_batches",
        "docs/lightning.md, several optimizers: 'Refused before any rank starts: "
        "accumulate_grad_batches other than 1'",
    ),
]


def refusal_of(case: Case) -> Refusal | None:
    return next((r for r in REFUSALS if r.applies(case)), None)


def defects_of(case: Case) -> list[str]:
    """The defects that show in ``case`` (none where ddpkit refuses it before it runs)."""
    if refusal_of(case) is not None:
        return []
    return [name for name, defect in DEFECTS.items() if defect.shows_in(case)]


def marks(case: Case) -> list[pytest.MarkDecorator]:
    found = defects_of(case)
    if not found:
        return []
    reason = "; ".join(DEFECTS[name].reason for name in found)
    return [pytest.mark.xfail(strict=True, raises=KnownDefect, reason=reason)]


def check(twin: Twin, case: Case, kind: str = "one") -> None:
    """The twins agree, after ``twin.DELIBERATE``. An unexplained difference is an
    ``AssertionError``, and so is a defect of :data:`DEFECTS` the case should show and does not
    (fixed: its prediction must go); the differences the case's defects explain, each of them
    seen, raise :class:`KnownDefect`."""
    assert twin.pl19.effects is not None, twin.pl19.failure()
    refusal = refusal_of(case)
    if refusal is not None:
        assert twin.ddpkit.returncode != 0, f"ddpkit ran what it refuses ({refusal.doc})"
        assert "MisconfigurationError" in twin.ddpkit.stderr, twin.ddpkit.failure()
        assert refusal.message in twin.ddpkit.stderr, twin.ddpkit.failure()
        return
    found = defects_of(case)
    if twin.ddpkit.effects is None:
        crashed = [n for n in found if (DEFECTS[n].crash or "\0") in twin.ddpkit.stderr]
        if not crashed:
            raise AssertionError(twin.ddpkit.failure())
        raise KnownDefect(f"{DEFECTS[crashed[0]].reason}\n{twin.ddpkit.failure()}")
    pl19, ddpkit = normalise(twin.pl19.effects, twin.ddpkit.effects, kind)
    every = differences(pl19, ddpkit)
    unseen = []
    for name in found:
        mask, before = DEFECTS[name].mask, differences(pl19, ddpkit)
        if mask is not None:
            mask(pl19, ddpkit)
        if mask is None or differences(pl19, ddpkit) == before:
            unseen.append(name)
    unexplained = differences(pl19, ddpkit)
    assert not unexplained, "the twins differ (- Lightning 1.9.5, + ddpkit):\n" + "\n".join(
        unexplained
    )
    assert not unseen, f"these defects no longer show here (fixed?): {unseen}"
    if found:
        raise KnownDefect("\n".join(every))


GRID_PARAMS = [pytest.param(c, id=case_id(c), marks=marks(c)) for c in GRID]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("case", GRID_PARAMS)
def test_a_1x_script_does_on_ddpkit_what_it_does_on_1_9(case: Case, tmp_path: Path) -> None:
    if case not in DEFAULT and not os.environ.get("DDPKIT_ALL_TWINS"):
        pytest.skip("one of the whole grid's cases: DDPKIT_ALL_TWINS=1 runs them all")
    pl19_flags, ddpkit_flags = DEVICES["one"]
    twin = run_twin(
        "train_1x.py", [*arguments(case), *pl19_flags], [*arguments(case), *ddpkit_flags],
        tmp_path,
    )  # fmt: skip
    check(twin, case)


#: The runs on two processes: (device kind, case). Spawn: ddpkit's ``accelerator="ddp_cpu"``
#: against 1.9.5's multiprocessing launcher (``ddp_fork``: ``twin.DEVICES`` says why not its
#: ``ddp_spawn``); ddp: ddpkit's ``accelerator="ddp"`` (``DDPPlugin``, its subprocess launcher)
#: against 1.9.5's ``strategy="ddp"``.
TWO_PROCESSES: list[tuple[str, Case]] = [
    ("spawn", {"optim": "sgd", "trainer": "plain", "callbacks": "ckpt", "epoch_end": "dict",
               "logging": "sync", "hparams": "plain", "data": "datamodule"}),
    ("ddp", {"optim": "sched_step", "trainer": "accumulate", "callbacks": "ckpt,es,lrmon",
             "epoch_end": "tensor", "logging": "step_epoch", "hparams": "module",
             "data": "loaders"}),
    ("spawn", {"optim": "gan_freq", "trainer": "limits", "callbacks": "lrmon",
               "epoch_end": "dict", "logging": "sync", "hparams": "plain", "data": "loaders"}),
]  # fmt: skip
#: The runs of a default session: spawn and the subprocess launcher once each.
TWO_PROCESSES_DEFAULT = {0, 1}


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("index", "kind", "case"),
    [
        pytest.param(i, kind, case, id=f"{kind}-{case_id(case)}", marks=marks(case))
        for i, (kind, case) in enumerate(TWO_PROCESSES)
    ],
)
def test_a_1x_script_on_two_processes(index: int, kind: str, case: Case, tmp_path: Path) -> None:
    if index not in TWO_PROCESSES_DEFAULT and not os.environ.get("DDPKIT_ALL_TWINS"):
        pytest.skip("one of the whole grid's cases: DDPKIT_ALL_TWINS=1 runs them all")
    pl19_flags, ddpkit_flags = DEVICES[kind]
    twin = run_twin(
        "train_1x.py", [*arguments(case), *pl19_flags], [*arguments(case), *ddpkit_flags],
        tmp_path,
    )  # fmt: skip
    check(twin, case, kind)


@pytest.mark.timeout(400)
def test_lightning_cli_fit_then_test_from_its_checkpoint(tmp_path: Path) -> None:
    """1.9's ``pytorch_lightning.cli.LightningCLI``: ``fit``, then ``test --ckpt_path`` of the
    checkpoint the fit wrote, each side in its own folder."""
    device = ["--trainer.accelerator", "cpu", "--trainer.devices", "1"]
    fit = ["fit", "--effects", "{effects}", "--trainer.max_epochs", "2", "--model.lr", "0.05",
           "--data.batch_size", "8", *device]  # fmt: skip
    check(run_twin("cli_1x.py", fit, fit, tmp_path, effects="fit"), {"cli": "fit"})
    test = ["test", "--effects", "{effects}", "--ckpt_path", "{out}/ckpt/last.ckpt", *device]
    check(run_twin("cli_1x.py", test, test, tmp_path, effects="test"), {"cli": "test"})


@pytest.mark.timeout(400)
def test_a_callback_with_1_9s_own_signatures(tmp_path: Path) -> None:
    case = {"optim": "sgd", "trainer": "limits", "callbacks": "sig19", "epoch_end": "none",
            "logging": "default", "hparams": "plain", "data": "loaders"}  # fmt: skip
    pl19_flags, ddpkit_flags = DEVICES["one"]
    twin = run_twin(
        "train_1x.py", [*arguments(case), *pl19_flags], [*arguments(case), *ddpkit_flags],
        tmp_path,
    )  # fmt: skip
    check(twin, case)


@pytest.mark.timeout(400)
def test_the_comparison_sees_a_different_learning_rate(tmp_path: Path) -> None:
    """Both sides on Lightning 1.9.5, one with another learning rate: the weights, the metrics
    and the CSV rows differ, and :func:`check` says so."""
    case = {"optim": "sgd", "trainer": "limits", "callbacks": "none", "epoch_end": "none",
            "logging": "default", "hparams": "plain", "data": "loaders"}  # fmt: skip
    flags = DEVICES["one"][0]
    base = [*arguments(case), *flags]
    twin = Twin(
        run_side("pl19", "train_1x.py", base, tmp_path / "a"),
        run_side("pl19", "train_1x.py", [*base, "--lr", "0.2"], tmp_path / "b"),
    )
    assert twin.pl19.effects is not None and twin.ddpkit.effects is not None
    with pytest.raises(AssertionError) as raised:
        check(twin, case)
    message = str(raised.value)
    for field in ("weights.layer.weight[0]", "metrics_after_fit.train_loss", "test[0].test_loss"):
        assert field in message, message
    assert "namespace.lr: 0.1 on 1.9.5, 0.2 on ddpkit" in message


def test_the_grid_covers_every_pair_and_the_default_every_value() -> None:
    pairs = set().union(*(_pairs(c) for c in GRID))
    for a, b in itertools.combinations(AXES, 2):
        for x, y in itertools.product(AXES[a], AXES[b]):
            assert (a, x, b, y) in pairs or not allowed({a: x, b: y}), (a, x, b, y)
    values = set().union(*(set(c.items()) for c in DEFAULT))
    assert values == {(axis, v) for axis, vs in AXES.items() for v in vs}
    assert all(allowed(c) for c in GRID)


def test_differences_names_each_field_within_the_tolerance() -> None:
    expected: dict[str, Any] = {"w": [1.0, 2.0], "hooks": ["a()", "b()"], "step": 4, "k": 1}
    actual: dict[str, Any] = {"w": [1.0 + 1e-9, 2.5], "hooks": ["a()", "c()"], "step": 4}
    found = differences(expected, actual)
    assert found[0] == "hooks: the lists differ (- 1.9.5, + ddpkit):"
    assert "-b()" in found and "+c()" in found
    assert "k: only on 1.9.5: 1" in found
    assert "w[1]: 2.0 on 1.9.5, 2.5 on ddpkit" in found
    assert not any(line.startswith("w[0]") for line in found)
