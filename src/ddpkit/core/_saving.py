"""Reading checkpoints: ``load_checkpoint``, and the hyperparameters ``load_from_checkpoint``
builds a module or DataModule from."""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

import torch

from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._paths import local_path

#: where a checkpoint keeps the module's hyperparameters (Lightning's key)
HPARAMS_KEY = "hyper_parameters"


def load_checkpoint(
    path: str | os.PathLike[str], *, weights_only: bool = True, map_location: Any = "cpu"
) -> dict[str, Any]:
    """Load on CPU. ``weights_only=True`` refuses to run code hidden in the file; pass False only
    for checkpoints you trust that hold arbitrary objects."""
    target = local_path(path)
    if not target.is_file():
        raise MisconfigurationError(
            f"load_checkpoint({str(path)!r}): no such file. Fix: pass the path of a .ckpt file "
            f"(trainer.checkpoint_callback.best_model_path after fit)."
        )
    data = torch.load(target, map_location=map_location, weights_only=weights_only)
    if not isinstance(data, dict) or "state_dict" not in data:
        raise MisconfigurationError(
            f"load_checkpoint({str(path)!r}): not a ddpkit checkpoint (no 'state_dict' key)."
        )
    return data


def load_hparams_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The hyperparameters a logger wrote (``hparams.yaml``: JSON, which YAML reads too)."""
    text = local_path(path).read_text()
    try:
        loaded = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        try:
            import yaml
        except ImportError as missing:
            raise MisconfigurationError(
                f"hparams_file={str(path)!r} is YAML that is not JSON; reading it needs PyYAML. "
                f"Fix: pip install pyyaml."
            ) from missing
        loaded = yaml.safe_load(text) or {}
    if not isinstance(loaded, dict):
        raise MisconfigurationError(f"hparams_file={str(path)!r} holds no mapping of names.")
    return loaded


def init_kwargs(cls: type, hparams: dict[str, Any]) -> dict[str, Any]:
    """The hyperparameters ``cls.__init__`` accepts (all of them if it takes ``**kwargs``)."""
    init = cls.__init__  # type: ignore[misc]
    parameters = list(inspect.signature(init).parameters.values())[1:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(hparams)
    names = {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL}
    return {k: v for k, v in hparams.items() if k in names}
