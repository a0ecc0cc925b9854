"""Lightning 2.x's rules for what reaches a logger and where it writes, held next to Lightning's
own loggers where it is installed: a subclass's ``name`` / ``version`` properties name the
folders, TensorBoardLogger's ``log_dir`` expands ``~`` and ``$VARS``, and ``log_graph`` traces a
module that no Trainer holds, or warns, with Lightning's words, that it has nothing to trace."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import ddpkit
import ddpkit.loggers

KINDS = ["CSVLogger", "TensorBoardLogger"]


def _renamed(base: type[Any]) -> type[Any]:
    """``base`` with Lightning 1.4's test override: ``name`` and ``version`` as properties."""

    class Renamed(base):  # type: ignore[misc, valid-type]
        @property
        def name(self) -> str:
            return "name"

        @property
        def version(self) -> str:
            return "version"

    return Renamed


@pytest.mark.parametrize("kind", KINDS)
def test_a_subclass_name_property_names_the_folders(tmp_path: Path, kind: str) -> None:
    """Before, root_dir joined the constructor's name (lightning_logs), not the property's."""
    if kind == "TensorBoardLogger":
        pytest.importorskip("tensorboard")
    ours = _renamed(getattr(ddpkit.loggers, kind))(tmp_path)
    assert ours.root_dir == str(tmp_path / "name")
    assert ours.log_dir == str(tmp_path / "name" / "version")
    pl_loggers = pytest.importorskip("pytorch_lightning.loggers")
    theirs = _renamed(getattr(pl_loggers, kind))(tmp_path)
    assert (ours.root_dir, ours.log_dir) == (theirs.root_dir, theirs.log_dir)


def test_a_name_property_is_where_the_next_version_is_found(tmp_path: Path) -> None:
    class Named(ddpkit.loggers.CSVLogger):
        @property
        def name(self) -> str:
            return "mine"

    (tmp_path / "mine" / "version_4").mkdir(parents=True)
    assert Named(tmp_path).version == 5
    assert Named(tmp_path).folders_to_write() == [str(tmp_path / "mine")]


def test_tensorboard_log_dir_expands_home_and_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lightning's TensorBoardLogger.log_dir expands them (its save_dir and root_dir do not);
    the next version is looked for where the run folders go."""
    pytest.importorskip("tensorboard")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RUNS", "runs")
    (tmp_path / "home" / "runs" / "tb" / "version_2").mkdir(parents=True)
    ours = ddpkit.loggers.TensorBoardLogger("~/$RUNS", name="tb", sub_dir="s")
    assert ours.save_dir == "~/$RUNS"
    assert ours.root_dir == "~/$RUNS/tb"
    assert ours.log_dir == str(tmp_path / "home" / "runs" / "tb" / "version_3" / "s")
    assert ours.folders_to_write() == [str(tmp_path / "home" / "runs" / "tb")]
    pl_loggers = pytest.importorskip("pytorch_lightning.loggers")
    theirs = pl_loggers.TensorBoardLogger("~/$RUNS", name="tb", version=3, sub_dir="s")
    assert (ours.save_dir, ours.root_dir, ours.log_dir) == (
        theirs.save_dir,
        theirs.root_dir,
        theirs.log_dir,
    )


class Traced(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def _graph_nodes(folder: str) -> list[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(folder)
    events.Reload()
    return [node.op for node in events.Graph().node]


@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")
def test_log_graph_of_a_module_without_a_trainer(tmp_path: Path) -> None:
    """Before, tracing read ``module.trainer``, which raised: torch printed 'Error occurs, No
    graph saved' and log_graph raised RuntimeError (Lightning traces under its
    ``_jit_is_scripting``, where ``trainer`` is None)."""
    pytest.importorskip("tensorboard")
    logger = ddpkit.loggers.TensorBoardLogger(tmp_path, log_graph=True)
    model = Traced()
    logger.log_graph(model, torch.rand(2, 32))
    logger.finalize("success")
    assert "aten::linear" in _graph_nodes(logger.log_dir)
    with pytest.raises(RuntimeError, match="Traced is not attached to a Trainer"):
        model.trainer  # noqa: B018 (the flag is down again once the graph is traced)


def _graph_warnings(lib: Any, input_array: Any) -> list[tuple[type[Warning], str]]:
    """What ``lib``'s TensorBoardLogger(log_graph=True).log_graph warns for a module without
    an example input."""
    module = Traced() if lib is ddpkit.loggers else _lightning_traced()
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lib.TensorBoardLogger(folder, log_graph=True).log_graph(module, input_array)
    return [(w.category, str(w.message)) for w in seen if "graph" in str(w.message)]


def _lightning_traced() -> Any:
    from pytorch_lightning.demos.boring_classes import BoringModel

    return BoringModel()  # its example_input_array is None


@pytest.mark.parametrize("input_array", [None, {"x": 1}], ids=["none", "dict"])
def test_log_graph_without_a_traceable_input_warns_as_lightning(input_array: Any) -> None:
    """Before, log_graph with no example input logged nothing and said nothing."""
    pytest.importorskip("tensorboard")
    ((category, ours),) = _graph_warnings(ddpkit.loggers, input_array)
    assert issubclass(category, UserWarning)
    assert ours.startswith("Could not log computational graph to TensorBoard: The ")
    pl_loggers = pytest.importorskip("pytorch_lightning.loggers")
    ((their_category, theirs),) = _graph_warnings(pl_loggers, input_array)
    # Lightning's words first (ddpkit adds the fix where Lightning's gives none)
    assert issubclass(category, their_category) and ours.startswith(theirs)


class Fitted(Traced):
    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self(batch[0]).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")
def test_fit_logs_the_graph_or_says_why_not(tmp_path: Path) -> None:
    """ddpkit's Trainer path: fit hands the module to log_graph (Lightning's _log_hyperparams)."""
    pytest.importorskip("tensorboard")
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.rand(8, 32)), batch_size=4)
    options = {"max_epochs": 1, "enable_progress_bar": False, "enable_model_summary": False}
    with_input = Fitted()
    with_input.example_input_array = torch.rand(2, 32)
    logger = ddpkit.loggers.TensorBoardLogger(tmp_path, name="a", log_graph=True)
    ddpkit.Trainer(default_root_dir=tmp_path, logger=logger, **options).fit(with_input, loader)
    assert "aten::linear" in _graph_nodes(logger.log_dir)
    logger = ddpkit.loggers.TensorBoardLogger(tmp_path, name="b", log_graph=True)
    trainer = ddpkit.Trainer(default_root_dir=tmp_path, logger=logger, **options)
    with pytest.warns(UserWarning, match=r"`model.example_input_array` attribute is not set"):
        trainer.fit(Fitted(), loader)


def _transfer_calls(library: str, folder: Path, on_datamodule: bool) -> list[tuple[Any, ...]]:
    """The batch-transfer hook calls of a 1-epoch fit of 2 batches with
    ``TensorBoardLogger(log_graph=True)`` and an int64 example input that
    ``on_after_batch_transfer`` casts (the graph cannot be traced without the cast): the
    module's hooks, or (``on_datamodule``) a DataModule's."""
    pl = pytest.importorskip("pytorch_lightning") if library == "lightning" else None
    lib: Any = pl if pl is not None else ddpkit
    from torch.utils.data import DataLoader, TensorDataset

    calls: list[tuple[Any, ...]] = []

    class Hooks:
        def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
            calls.append(("before", type(batch).__name__, dataloader_idx))
            return batch

        def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
            calls.append(("after", type(batch).__name__, dataloader_idx))
            if isinstance(batch, torch.Tensor):
                return batch.float()
            return [b.float() for b in batch]

    base = lib.LightningModule if pl is not None else ddpkit.Module

    class Model(*((base,) if on_datamodule else (Hooks, base))):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(3, 1)
            self.example_input_array = torch.ones(2, 3, dtype=torch.int64)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self(batch[0]).sum()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data_base = lib.LightningDataModule if pl is not None else ddpkit.DataModule

    class Data(Hooks, data_base):  # type: ignore[misc, valid-type]
        def train_dataloader(self) -> Any:
            return DataLoader(TensorDataset(torch.ones(4, 3, dtype=torch.int64)), batch_size=2)

    logger = lib.loggers.TensorBoardLogger(folder, log_graph=True)
    trainer = lib.Trainer(
        max_epochs=1, logger=logger, enable_progress_bar=False, enable_model_summary=False,
        enable_checkpointing=False, accelerator="cpu", devices=1,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Model(), datamodule=Data()) if on_datamodule else trainer.fit(
            Model(), Data().train_dataloader()
        )
    assert "aten::linear" in _graph_nodes(logger.log_dir)
    return calls


@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")
@pytest.mark.parametrize("on_datamodule", [False, True], ids=["module", "datamodule"])
def test_log_graph_traces_the_example_through_the_batch_transfer_hooks(
    tmp_path: Path, on_datamodule: bool
) -> None:
    """As Lightning's log_graph: the example goes through on_before_batch_transfer, onto the
    module's device and through on_after_batch_transfer (a DataModule's hooks first) before it
    is traced. Before, ddpkit traced the raw example: here an int64 input the Linear refuses (the
    fit failed at its start), and on a GPU a CPU tensor for a CUDA module."""
    pytest.importorskip("tensorboard")
    ours = _transfer_calls("ddpkit", tmp_path / "ddpkit", on_datamodule)
    theirs = _transfer_calls("lightning", tmp_path / "lightning", on_datamodule)
    assert ours == theirs
    assert ours[:2] == [("before", "Tensor", 0), ("after", "Tensor", 0)]  # the example first
