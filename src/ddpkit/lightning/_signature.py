"""The signature of ``ddpkit.lightning.Trainer.__init__``: Lightning 2.x's keywords, then 1.x's.

Tools that read a Trainer's signature — Lightning 2.x's ``LightningCLI`` (through jsonargparse),
1.x's ``Trainer.add_argparse_args`` (:mod:`ddpkit.lightning._arguments`), ``inspect`` — see every
keyword the Trainer takes, with a type and a default:

- each keyword of the installed Lightning, with its default; where Lightning 1.x took more
  values (``max_steps=None``, ``accumulate_grad_batches={0: 1}``, ``plugins="ddp_..."``, the
  device flags' ``None``) its 1.x type is added to the annotation;
- each 1.x keyword Lightning 2.x removed (the shared table, :mod:`ddpkit._compat_1x.keywords`,
  device flags included), with its 1.x type and its last 1.x default — a value that asks for
  nothing, so a tool that passes every default gets the same Trainer as ``Trainer()``;
- ``supervise`` and ``max_restarts``, ddpkit's own.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytorch_lightning as pl

from ddpkit._compat_1x.keywords import DEVICE_ROWS, ROWS
from ddpkit.plugins import ClusterEnvironment, PrecisionPlugin, TrainingTypePlugin

_KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY
#: ddpkit's own keywords of ``ddpkit.lightning.Trainer``, after Lightning's and 1.x's.
DDPKIT_KEYWORDS: tuple[inspect.Parameter, ...] = (
    inspect.Parameter("supervise", _KEYWORD_ONLY, default=None, annotation=bool | None),
    inspect.Parameter("max_restarts", _KEYWORD_ONLY, default=0, annotation=int),
)

_DDPKIT_PLUGIN = TrainingTypePlugin | ClusterEnvironment | PrecisionPlugin | str
#: Lightning 2.x keywords that took more in 1.x than 2.x's annotation says.
_WIDER: dict[str, Any] = {
    "accelerator": None,  # 1.x's default; ddpkit's Accelerator objects also go in here
    "strategy": TrainingTypePlugin | None,
    "devices": None,
    "plugins": _DDPKIT_PLUGIN | list[Any] | None,  # registry names, ddpkit's plugins
    **{name: row.annotation for name, row in ROWS.items() if row.kept},
}


def _widened(parameter: inspect.Parameter) -> inspect.Parameter:
    if parameter.name not in _WIDER:
        return parameter
    extra = _WIDER[parameter.name]
    annotation = parameter.annotation | (type(None) if extra is None else extra)
    return parameter.replace(annotation=annotation)


def trainer_signature() -> inspect.Signature:
    """``self``, Lightning 2.x's keywords, the 1.x keywords, ddpkit's own (see the module)."""
    base = inspect.signature(pl.Trainer.__init__)
    parameters = [_widened(p) for p in base.parameters.values()]
    taken = {p.name for p in parameters}
    one_x = [
        inspect.Parameter(row.name, _KEYWORD_ONLY, default=row.default, annotation=row.annotation)
        for row in (*DEVICE_ROWS.values(), *ROWS.values())
        if row.is_1x and row.name not in taken
    ]
    return base.replace(parameters=[*parameters, *one_x, *DDPKIT_KEYWORDS])
