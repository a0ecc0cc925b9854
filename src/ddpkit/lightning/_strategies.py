"""Lightning 1.6–1.9's ``DDPSpawnStrategy``, which Lightning 2.0 folded into ``DDPStrategy``."""

from __future__ import annotations

from typing import Any

from pytorch_lightning.strategies import DDPStrategy


class DDPSpawnStrategy(DDPStrategy):
    """``DDPStrategy`` whose ranks are spawned (``start_method="spawn"``, 1.x's only one; 1.7–1.9
    also took ``"fork"`` and ``"forkserver"``), as ``pytorch_lightning.strategies.DDPSpawnStrategy``
    was. Lightning 2.x's spelling: ``DDPStrategy(start_method="spawn", ...)``."""

    def __init__(self, *args: Any, start_method: str = "spawn", **kwargs: Any) -> None:
        super().__init__(*args, start_method=start_method, **kwargs)  # type: ignore[arg-type,misc]
