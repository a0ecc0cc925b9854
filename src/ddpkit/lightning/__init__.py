"""Lightning code on ddpkit: Lightning 1.x's Trainer calls, run by Lightning 2.x.

``ddpkit.lightning.Trainer`` is a ``pytorch_lightning.Trainer`` that also takes Lightning 1.x's
device flags (resolved by ddpkit's connector) and 1.x's other keywords (each mapped onto its 2.x
spelling or refused with the replacement named). Needs the ``lightning`` extra
(``pip install ddpkit[lightning]``); ``import ddpkit`` never imports Lightning.
"""

from __future__ import annotations

try:
    import pytorch_lightning  # noqa: F401
except ModuleNotFoundError as err:  # pragma: no cover - the extra is installed in the suite
    raise ModuleNotFoundError(
        "ddpkit.lightning runs on Lightning 2.x, which is not installed. "
        "Fix: pip install 'ddpkit[lightning]' (pytorch-lightning>=2.5,<3)."
    ) from err

from ddpkit.lightning.supervised import SupervisedDDPStrategy
from ddpkit.lightning.trainer import Trainer
from ddpkit.plugins import DDPPlugin, DDPSpawnPlugin

__all__ = ["DDPPlugin", "DDPSpawnPlugin", "SupervisedDDPStrategy", "Trainer"]
