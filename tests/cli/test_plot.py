"""``ddpkit plot``: any run's metrics.csv (ddpkit's, Lightning's) drawn to a picture."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit.cli import main
from ddpkit.utilities._curves import read_metrics

image = pytest.importorskip("matplotlib.image")
Capture = pytest.CaptureFixture[str]


class _Tiny(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(2, 2)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], idx: int) -> torch.Tensor:
        loss = nn.functional.cross_entropy(self.net(batch[0]), batch[1])
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], idx: int) -> None:
        logits = self.net(batch[0])
        self.log("val_acc", (logits.argmax(1) == batch[1]).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.fixture
def run_csv(tmp_path: Path) -> Path:
    """The metrics.csv of a real (one-process) run."""
    x = torch.randn(64, 2, generator=torch.Generator().manual_seed(0))
    loader = DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=4)
    trainer = ddpkit.Trainer(max_epochs=3, log_every_n_steps=4, default_root_dir=tmp_path,
                             enable_progress_bar=False, enable_checkpointing=False)  # fmt: skip
    trainer.fit(_Tiny(), loader, loader)
    return tmp_path / "metrics.csv"


def _decodes(path: Path) -> None:
    picture = image.imread(path)
    assert picture.shape[0] > 200 and picture.shape[1] > 400
    assert picture.std() > 0.05  # not blank


def test_a_runs_csv_becomes_a_picture_beside_it(run_csv: Path, capsys: Capture) -> None:
    assert main(["plot", str(run_csv)]) == 0
    out = capsys.readouterr().out.strip()
    assert out == str(run_csv.with_suffix(".png").resolve())
    _decodes(Path(out))


def test_the_columns_a_run_logged_are_read(run_csv: Path) -> None:
    series = read_metrics(run_csv)
    assert sorted(series) == ["train_loss_epoch", "train_loss_step", "val_acc"]
    # Lightning's step: an epoch's row carries its last batch's (global_step - 1)
    assert [step for step, _ in series["train_loss_epoch"]] == [15, 31, 47]
    assert len(series["train_loss_step"]) == 12  # every 4th of 48 steps


@pytest.mark.parametrize(
    ("output", "written"),
    [("out.png", "out.png"), ("pictures/", "pictures/metrics.png"), ("curves", "curves.png"),
     ("out.svg", "out.svg")],
)  # fmt: skip
def test_the_output_is_where_o_says(
    output: str, written: str, run_csv: Path, tmp_path: Path, capsys: Capture
) -> None:
    target = tmp_path / output
    assert (
        main(["curves", str(run_csv), "-o", f"{target}{'/' if output.endswith('/') else ''}"]) == 0
    )
    assert capsys.readouterr().out.strip() == str((tmp_path / written).resolve())
    assert (tmp_path / written).stat().st_size > 1000
    assert [p.name for p in (tmp_path / written).parent.iterdir() if p.name.startswith(".")] == []


def test_a_lightning_csv_is_drawn_too(tmp_path: Path, capsys: Capture) -> None:
    # Lightning's CSVLogger: an epoch column among the metrics, val/ and train/ names.
    csv = tmp_path / "metrics.csv"
    csv.write_text(
        "epoch,step,train/loss,val/loss,val/acc\n"
        "0,9,0.9,,\n0,9,,0.8,0.6\n1,19,0.5,,\n1,19,,0.45,0.8\n"
    )
    assert main(["plot", str(csv)]) == 0
    _decodes(Path(capsys.readouterr().out.strip()))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file. Fix: pass the metrics.csv of a run"),
        ("epoch,step\n", "holds no metric values (columns: epoch, step). Fix: log metrics"),
        (b"\xff\xfe\x00binary", "is not a CSV file"),
    ],
    ids=["missing", "no-metrics", "binary"],
)
def test_a_file_it_cannot_draw_is_named_with_a_fix(
    content: str | bytes | None, message: str, tmp_path: Path, capsys: Capture
) -> None:
    path = tmp_path / "metrics.csv"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    assert main(["plot", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ddpkit plot {path}: {path}")
    assert message in err
    assert not path.with_suffix(".png").exists()


def test_a_folder_gets_pointed_at_its_csv(tmp_path: Path, capsys: Capture) -> None:
    assert main(["plot", str(tmp_path)]) == 2
    assert f"is a folder. Fix: pass the CSV in it, {tmp_path / 'metrics.csv'}" in (
        capsys.readouterr().err
    )


def test_an_unknown_picture_format_lists_the_known_ones(
    run_csv: Path, tmp_path: Path, capsys: Capture
) -> None:
    assert main(["plot", str(run_csv), "-o", str(tmp_path / "out.bmpx")]) == 2
    err = capsys.readouterr().err
    assert "matplotlib cannot write 'bmpx' files. Fix: end the name with one of" in err
    assert ".png" in err and not (tmp_path / "out.bmpx").exists()


def test_without_matplotlib_it_names_the_extra(
    run_csv: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package imports as
    assert main(["plot", str(run_csv)]) == 2
    err = capsys.readouterr().err
    assert "drawing metrics needs matplotlib, which is not installed." in err
    assert "Fix: pip install 'ddpkit[plot]'" in err


@pytest.mark.timeout(60)
def test_importing_ddpkit_and_its_command_imports_no_matplotlib() -> None:
    # (tqdm is no test of this: torch imports it for torch.hub.)
    code = (
        "import sys, ddpkit, ddpkit.cli, ddpkit.utilities._curves\n"
        "print(sorted(m for m in ('matplotlib', 'PIL') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
