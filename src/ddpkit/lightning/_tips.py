"""Lightning's own tips, quiet under ``ddpkit.lightning`` unless asked for.

Lightning 2.x prints advertisements on every run ("💡 Tip: ... litlogger", "... litmodels") and,
where an ``srun`` binary exists, a hint to prepend ``srun`` (ddpkit's connector says what a SLURM
job needs in its own plan). Once a ``ddpkit.lightning.Trainer`` exists in a process (built there, or
unpickled into a spawned rank), those records go to the ``ddpkit.lightning.tips`` logger at DEBUG
level instead, and the ``srun`` hint is not shown. Asking for them:
``logging.getLogger("ddpkit.lightning.tips").setLevel(logging.DEBUG)`` (with a handler, e.g.
``logging.basicConfig(level=logging.DEBUG)``) before the Trainer is built.
"""

from __future__ import annotations

import logging
import warnings

#: Where Lightning's tips go.
TIPS_LOGGER = logging.getLogger("ddpkit.lightning.tips")
#: The loggers Lightning's ``rank_zero_info`` writes to.
_LIGHTNING_LOGGERS = (
    "pytorch_lightning.utilities.rank_zero",
    "lightning_fabric.utilities.rank_zero",
)
_SRUN_HINT = r"The `srun` command is available on your system but is not used"


def _tip_filter(record: logging.LogRecord) -> bool:
    """A logging filter (a plain callable will do): moves Lightning's "💡 Tip:" records to
    :data:`TIPS_LOGGER` (DEBUG)."""
    message = record.getMessage()
    if not message.startswith("💡 Tip:"):
        return True
    TIPS_LOGGER.debug(message)
    return False


def quiet_tips() -> None:
    """Route Lightning's tips to :data:`TIPS_LOGGER` in this process (idempotent), unless that
    logger already shows DEBUG records: then the user asked for them where Lightning prints."""
    if TIPS_LOGGER.isEnabledFor(logging.DEBUG):
        return
    for name in _LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        if _tip_filter not in logger.filters:
            logger.addFilter(_tip_filter)
    warnings.filterwarnings("ignore", message=_SRUN_HINT)
