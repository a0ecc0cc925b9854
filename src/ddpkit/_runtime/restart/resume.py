"""The ranks' side of a restart: every rank's RNG states in each checkpoint, and where a
restarted fit resumes (the contract: the package docstring)."""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ddpkit._runtime.restart.attempt import Attempt, current_attempt
from ddpkit._runtime.restart.port import FitPort, Ranks
from ddpkit.utilities import _rng as rng

#: the file ddpkit keeps in the run folder when the user has no ModelCheckpoint
KEPT_NAME = "restart.ckpt"
#: where a checkpoint keeps the ranks' RNG states
RNG_KEY = "ddpkit_rng"


def is_complete(path: Path) -> bool:
    """True when ``path`` is a whole checkpoint: ``torch.save``'s zip format ends with its
    directory, which a write cut short never reached (Lightning writes its checkpoints in place,
    not atomically as ddpkit does)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def written_alone(path: Path) -> bool:
    """True when ``path`` holds one rank's RNG states of a job of several: a save made while the
    other ranks may be gone (``ModelCheckpoint(save_on_exception=True)``, which names its files
    as any other save, and its last.ckpt). That state is mid-step, at a failure: a restart never
    resumes from it. Only the pickle is read (the tensors are mapped, not loaded)."""
    try:
        saved = torch.load(path, map_location="cpu", mmap=True, weights_only=False)
    except Exception:  # a file torch cannot map (an old format): read it whole
        saved = torch.load(path, map_location="cpu", weights_only=False)
    states = saved.get(RNG_KEY) if isinstance(saved, dict) else None
    if not isinstance(states, dict) or not isinstance(states.get("ranks"), dict):
        return False
    return len(states["ranks"]) < int(states.get("world_size", 1))


def newest_checkpoint(
    folders: Iterable[str | os.PathLike[str]], since: float | None
) -> Path | None:
    """The newest complete ``*.ckpt`` in ``folders`` modified at or after ``since`` (None: any),
    or None. Hidden files (a write under way) and the files one rank wrote alone at a failure
    (:func:`written_alone`) are never chosen."""
    found: list[tuple[int, Path]] = []
    for folder in dict.fromkeys(os.fspath(f) for f in folders):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if not name.endswith(".ckpt") or name.startswith("."):
                continue
            try:
                mtime = entry.stat().st_mtime_ns  # a link to the last one: its target's time
            except OSError:
                continue
            if since is None or mtime >= since * 1e9:
                found.append((mtime, Path(entry.path)))
    newest_first = sorted(found, key=lambda item: item[0], reverse=True)
    return next(
        (path for _, path in newest_first if is_complete(path) and not written_alone(path)), None
    )


def resume_line(attempt: Attempt, path: str | None, position: str) -> str:
    """What rank 0 of a restarted fit prints: the restart, its cause, where it resumes."""
    of = f" of {attempt.max_restarts}" if attempt.max_restarts else ""
    cause = f" after {attempt.cause}" if attempt.cause else ""
    where = f"resumes from {path} ({position})" if path else f"starts over ({position})"
    return f"ddpkit: restart {attempt.number}{of}{cause}: fit {where}"


def rng_states(ranks: Ranks, *, collective: bool) -> dict[str, Any]:
    """Every rank's RNG states (``collective``: gathered, every rank must call it; else this
    rank's own only, for a rank that may be alone)."""
    mine = rng.capture()
    if not collective:
        return {"world_size": ranks.world_size, "ranks": {str(ranks.global_rank): mine}}
    gathered = ranks.all_gather_bytes(rng.encode(mine))
    states = {
        str(r): (mine if r == ranks.global_rank else rng.decode(data))
        for r, data in enumerate(gathered)
    }
    return {"world_size": len(gathered), "ranks": states}


def rng_of_rank(
    checkpoint: Mapping[str, Any] | None, rank: int, world_size: int
) -> dict[str, Any] | None:
    """This rank's RNG states in ``checkpoint``; None when it has none for a job of this size."""
    saved = (checkpoint or {}).get(RNG_KEY)
    if not isinstance(saved, dict) or saved.get("world_size") != world_size:
        return None
    found = saved.get("ranks", {}).get(str(rank))
    return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class Resume:
    """Where a fit starts from: ``path`` (None: the module as it is) and, for a restarted fit,
    the attempt."""

    path: str | None
    attempt: Attempt | None = None

    @classmethod
    def decide(cls, fit: FitPort, given: str | None) -> Resume:
        """On every rank (for a distributed fit, one collective). Rank 0 decides: on a restart,
        the newest complete checkpoint written since the run started, else the fit's own
        ``ckpt_path``; the other ranks are told as JSON."""
        ranks = fit.ranks
        if ranks.world_size == 1:
            return cls(given)
        decision: dict[str, Any] | None = None
        if ranks.is_global_zero:
            attempt = current_attempt()
            decision = {"path": given, "attempt": None}
            if attempt.number > 0:
                found = newest_checkpoint(fit.checkpoint_folders(), attempt.since())
                told = [attempt.number, attempt.max_restarts, attempt.cause]
                decision = {"path": str(found) if found is not None else given, "attempt": told}
        decision = ranks.broadcast_json(decision)
        told = decision["attempt"]
        return cls(decision["path"], None if told is None else Attempt(*told))

    def announce(self, fit: FitPort, checkpoint: Mapping[str, Any] | None) -> None:
        """Rank 0 of a restarted fit says so: one line, the cause, where it resumes."""
        if self.attempt is not None and fit.ranks.is_global_zero:
            line = resume_line(self.attempt, self.path, fit.position(checkpoint))
            sys.stderr.write(f"{line}\n")
            sys.stderr.flush()

    def before_epochs(
        self, ranks: Ranks, checkpoint: Mapping[str, Any] | None
    ) -> Callable[[], None] | None:
        """For a restarted fit: set this rank's RNG states of the checkpoint, just before the
        first epoch, where the uninterrupted run stood when it wrote it."""
        if self.attempt is None:
            return None
        state = rng_of_rank(checkpoint, ranks.global_rank, ranks.world_size)
        return None if state is None else (lambda: rng.restore(state))
