"""Lightning code on ddpkit: ``pytorch_lightning`` as a 1.x project knew it, run by Lightning 2.x.

One porting rule: every ``pytorch_lightning`` of a 1.x project's imports becomes
``ddpkit.lightning`` (``sed -i 's/pytorch_lightning/ddpkit.lightning/g' *.py``), or none at all
with ``python -m ddpkit.lightning SCRIPT ARGS``. ``ddpkit.lightning.<path>`` exists for every
module path of Lightning 1.0–1.9 and of the installed 2.x: Lightning 2.x's module with the 1.x
names on top (:mod:`ddpkit.lightning._mirror`). Each 1.x name and member has one status in the
1.x surface table (docs/lightning-1x-surface.md): unchanged in 2.x, provided here with 1.x
semantics, refused with the 2.x fix, or out of scope with the reason.

What ddpkit provides at this level: ``Trainer`` (Lightning 2.x's own, which also takes 1.x's
device flags and keywords, resolved by ddpkit's connector), ``LightningModule`` and
``LightningDataModule`` (2.x's, with 1.x's members), ``LightningCLI`` (1.x's),
``DDPPlugin`` / ``DDPSpawnPlugin`` (1.x's device plugins), ``metrics`` (1.x's, on torchmetrics)
and ``SupervisedDDPStrategy``. Every other name is Lightning's own. Needs the ``lightning``
extra; ``import ddpkit`` never imports Lightning.
"""

from __future__ import annotations

from typing import Any

try:
    import pytorch_lightning
except ModuleNotFoundError as err:  # pragma: no cover - the extra is installed in the suite
    raise ModuleNotFoundError(
        "ddpkit.lightning runs on Lightning 2.x, which is not installed. "
        "Fix: pip install 'ddpkit[lightning]' (pytorch-lightning>=2.5,<3)."
    ) from err

from ddpkit.lightning import _mirror
from ddpkit.lightning._datamodule import LightningDataModule
from ddpkit.lightning._module import LightningModule
from ddpkit.lightning._supervised import SupervisedDDPStrategy
from ddpkit.lightning._trainer import Trainer
from ddpkit.plugins import DDPPlugin, DDPSpawnPlugin

__all__ = [
    "DDPPlugin",
    "DDPSpawnPlugin",
    "LightningCLI",
    "LightningDataModule",
    "LightningModule",
    "SupervisedDDPStrategy",
    "Trainer",
    "__version__",
    "metrics",
]

#: The Lightning that runs the code (2.x): a 1.x script comparing versions sees the real one.
__version__: str = pytorch_lightning.__version__  # type: ignore[attr-defined]

_mirror.install()


def __getattr__(name: str) -> Any:
    # Imported on first use: LightningCLI pulls in Lightning's CLI, metrics torchmetrics.
    if name.startswith("__"):
        raise AttributeError(name)
    value = _mirror.resolve(_mirror.LIGHTNING, pytorch_lightning, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *dir(pytorch_lightning)})
