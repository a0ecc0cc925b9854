"""``Logger``: the interface of every logger (Lightning's), and what they share.

The loop calls a logger on every rank (as Lightning does); a ddpkit logger writes on global rank
zero only — elsewhere its methods return at once and ``experiment`` is a stand-in that accepts
any call. Before each stage the loop calls :meth:`Logger.attach` on every rank with the rank and
rank zero's version, so every rank (and the checkpoint directory) names the same run.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from abc import ABC, abstractmethod
from argparse import Namespace
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ddpkit._lightning_surface import LightningCounterpart
from ddpkit.errors import MisconfigurationError
from ddpkit.utilities._files import atomic_write
from ddpkit.utilities._paths import local_path, refuse_nul
from ddpkit.utilities._reprs import safe_repr


class DummyExperiment:
    """What ``experiment`` is on the ranks that do not write: every call does nothing."""

    def nop(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, _: str) -> Any:
        return self.nop

    def __getitem__(self, idx: int) -> DummyExperiment:
        return self


def next_version(root: str | os.PathLike[str]) -> int:
    """One more than the largest ``version_N`` folder under ``root`` (0 when there is none)."""
    folder = local_path(root)
    if not folder.is_dir():
        return 0
    found = [
        int(m.group(1))
        for entry in folder.iterdir()
        if entry.is_dir() and (m := re.fullmatch(r"version_(\d+)", entry.name))
    ]
    return max(found) + 1 if found else 0


def scalar(value: Any) -> float:
    """A logged value as a float (a one-element tensor, a number)."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().float().cpu())
    return float(value)


def flatten_params(params: Mapping[str, Any] | Namespace, prefix: str = "") -> dict[str, Any]:
    """``{"opt": {"lr": 1}}`` → ``{"opt/lr": 1}`` (Lightning's separator)."""
    if isinstance(params, Namespace):
        params = vars(params)
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Namespace):
            value = vars(value)
        if isinstance(value, Mapping) and value:
            flat.update(flatten_params(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


def convert_params(params: Mapping[str, Any] | Namespace | None) -> dict[str, Any]:
    """Hyperparameters as a dict, every ``Namespace`` in them a dict too (what
    ``hparams.yaml`` holds, nested as given)."""
    if params is None:
        return {}
    if isinstance(params, Namespace):
        params = vars(params)
    return {
        key: convert_params(value) if isinstance(value, Namespace) else value
        for key, value in params.items()
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, Namespace):
        return _jsonable(vars(value))
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return repr(value)


class Logger(LightningCounterpart, ABC):
    """A logger: ``log_metrics`` and ``log_hyperparams``, and where its files go."""

    #: Lightning's separator for a prefix and for nested hyperparameter names
    LOGGER_JOIN_CHAR = "-"

    def __init__(self) -> None:
        self._rank = 0

    @property
    @abstractmethod
    def name(self) -> str | None:
        """The experiment's name (a folder under ``save_dir``)."""

    @property
    @abstractmethod
    def version(self) -> int | str | None:
        """The run's version (``version_N`` folder); resolved on first use."""

    @property
    def save_dir(self) -> str | None:
        return None

    @property
    def root_dir(self) -> str | None:
        return None

    @property
    def log_dir(self) -> str | None:
        return None

    @property
    def group_separator(self) -> str:
        return "/"

    @property
    def rank(self) -> int:
        """The global rank this logger runs on (set by :meth:`attach`)."""
        return self._rank

    def attach(self, global_rank: int, version: int | str | None) -> None:
        """Called by the loop on every rank before a stage: this rank and rank zero's version."""
        self._rank = global_rank
        self._set_version(version)

    def _set_version(self, version: int | str | None) -> None:
        """Fix the version (a subclass that resolves one lazily keeps it)."""

    @abstractmethod
    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None: ...

    @abstractmethod
    def log_hyperparams(
        self, params: Mapping[str, Any] | Namespace, *args: Any, **kw: Any
    ) -> None: ...

    def log_graph(self, model: Any, input_array: Any = None) -> None:
        """Record the model's graph (only where a logger supports it)."""

    def save(self) -> None:
        """Write what is buffered."""

    def finalize(self, status: str) -> None:
        """The stage ended (``status``: "success" or "failed"): write and close."""
        self.save()

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        """A checkpoint was written."""


def check_folder_arguments(kind: str, given: Mapping[str, Any], init: Callable[..., Any]) -> str:
    """What every folder logger checks when it is built (``given``: its arguments by name, with
    ``save_dir``, ``name``, ``version`` and ``prefix``). Returns how the messages quote the call:
    ``CSVLogger(save_dir='logs', name=3)``, the arguments that differ from ``init``'s defaults
    (safe reprs)."""
    defaults = {n: p.default for n, p in inspect.signature(init).parameters.items()}

    def is_default(name: str, value: Any) -> bool:
        default = defaults[name]
        return value is default or (type(value) is type(default) and value == default)

    shown = [f"{k}={safe_repr(v)}" for k, v in given.items() if not is_default(k, v)]
    call = f"{kind}({', '.join(shown)})"
    save_dir, name, version = given["save_dir"], given["name"], given["version"]
    for name_ in ("save_dir", "name", "version"):
        refuse_nul(kind, name_, given[name_])
    if isinstance(save_dir, bytes) or not isinstance(save_dir, str | os.PathLike):
        raise MisconfigurationError(
            f"{call}: save_dir is the folder the logs go to, a str or pathlib.Path. Fix: "
            f"{kind}('logs')."
        )
    folder = local_path(save_dir)
    # os.path's checks, not Path's: a name too long to stat is False there (as before the `~`
    # change), and mkdir at the first write reports it, as Lightning's fsspec does.
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise MisconfigurationError(
            f"{call}: save_dir={os.fspath(save_dir)!r} is a file, not a folder. Fix: pass a "
            f"folder (it is created if missing), e.g. its parent, "
            f"{os.path.dirname(os.path.abspath(save_dir))!r}."
        )
    if name is not None and not isinstance(name, str):
        raise MisconfigurationError(
            f"{call}: name is the experiment's folder under save_dir, a str (None or '' for "
            f"none). Fix: name='lightning_logs'."
        )
    bad_int = isinstance(version, bool) or (isinstance(version, int) and version < 0)
    if bad_int or (version is not None and not isinstance(version, int | str)):
        raise MisconfigurationError(
            f"{call}: version is None (the next free version_N), an int ≥ 0 (version_<int>) "
            f"or a folder name (str). Fix: version=None."
        )
    if not isinstance(given["prefix"], str):
        raise MisconfigurationError(f"{call}: prefix must be a str. Fix: prefix=''.")
    return call


class FolderLogger(Logger):
    """A logger that writes under ``<save_dir>/<name>/version_<N>`` (Lightning's layout):
    ``version=None`` takes the next free number when first asked, a string is the folder's own
    name, and ``name=""`` writes into ``save_dir`` itself."""

    def __init__(
        self, save_dir: str | os.PathLike[str], name: str | None, version: int | str | None
    ) -> None:
        super().__init__()
        self._save_dir = os.fspath(save_dir)
        self._name = name or ""
        self._version = version

    def folders_to_write(self) -> list[str]:
        """Where this logger will write (checked before a run starts: a file in the way or a
        read-only folder is an error then, not after an epoch)."""
        return [self._runs_root()]

    def _runs_root(self) -> str:
        """The folder the run folders are written under, where ``version=None`` looks for
        ``version_N``: ``root_dir`` (a subclass whose ``log_dir`` rewrites the path says so
        here, so the number and the check look where the files go)."""
        return self.root_dir

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> int | str:
        if self._version is None:
            self._version = next_version(self._runs_root())
        return self._version

    def _set_version(self, version: int | str | None) -> None:
        if version is not None:
            self._version = version

    @property
    def save_dir(self) -> str:
        return self._save_dir

    @property
    def root_dir(self) -> str:
        # self.name, not self._name: a subclass that overrides the ``name`` property names the
        # folder (Lightning's root_dir joins self.name). No name: the save folder itself, as
        # Lightning 1.x's (2.x's join leaves a trailing "/")
        name = self.name
        return os.path.join(self._save_dir, name) if name else self._save_dir

    def _version_dir(self) -> str:
        """``root_dir`` joined with the version's folder name."""
        version = self.version if isinstance(self.version, str) else f"version_{self.version}"
        return os.path.join(self.root_dir, version) if version else self.root_dir


def write_yaml(path: str | os.PathLike[str], params: Mapping[str, Any]) -> None:
    """A ``.yaml`` file (a logger's ``hparams.yaml``, ModelCheckpoint's ``best_k_models.yaml``)
    as JSON (JSON is YAML, so ``yaml.safe_load`` reads it too), written atomically."""
    target = local_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_jsonable(dict(params)), indent=2, sort_keys=True) + "\n"
    atomic_write(target, text.encode())
