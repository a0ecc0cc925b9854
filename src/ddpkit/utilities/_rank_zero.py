"""Messages that only rank zero shows, once."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)
#: Packages whose frames lie between a ddpkit warning and the user's line (a stage entered through
#: ``contextlib``, a Trainer built by LightningCLI): skipped when they are loaded.
_LIBRARIES = ("contextlib", "pytorch_lightning", "lightning_fabric", "lightning_utilities",
              "jsonargparse")  # fmt: skip


def _not_the_users() -> tuple[str, ...]:
    """File prefixes of frames that are not the user's: ddpkit's and the loaded libraries'."""
    prefixes = [_PACKAGE_DIR]
    for name in _LIBRARIES:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            prefixes.append(path if name == "contextlib" else str(Path(path).parent))
    return tuple(prefixes)


#: ddpkit's logger: what Lightning tells at INFO level (a fit stopped by max_epochs, a
#: checkpoint restored, a seed set), ddpkit tells here, on rank zero
log = logging.getLogger("ddpkit")


def _configure() -> None:
    """Lightning's arrangement, made at the first message rather than at import: INFO and up go
    to stderr unless the application configured logging itself (the root logger has handlers),
    in which case they propagate to it."""
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)
    if not log.handlers and not logging.getLogger().hasHandlers():
        log.addHandler(logging.StreamHandler())
        log.propagate = False


def rank_zero_info(message: str, *, env: Mapping[str, str] | None = None) -> None:
    """Log ``message`` at INFO on rank zero only."""
    if is_rank_zero(env):
        log_info(message)


def log_info(message: str) -> None:
    """Log ``message`` at INFO on this rank (a caller that says which rank it is on)."""
    _configure()
    log.info(message)


def is_rank_zero(env: Mapping[str, str] | None = None) -> bool:
    """True unless the environment names a non-zero rank (torchrun, srun or ddpkit's own)."""
    env = os.environ if env is None else env
    return all(
        env.get(k, "0") in ("0", "") for k in ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK")
    )


def user_stacklevel() -> int:
    """The stack level of the first frame outside ddpkit (and the libraries between ddpkit and
    the user: ``contextlib``, Lightning, jsonargparse): the user's own line."""
    level = 1
    frame = sys._getframe(1)
    skipped = _not_the_users()
    while frame is not None and frame.f_code.co_filename.startswith(skipped):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def rank_zero_warn(
    message: str, category: type[Warning], *, env: Mapping[str, str] | None = None
) -> None:
    """Warn on rank zero only (the other ranks run the same line), pointing at the user's
    line, so Python's own filters show it once per call site."""
    if not is_rank_zero(env):
        return
    warnings.warn(message, category, stacklevel=user_stacklevel())
