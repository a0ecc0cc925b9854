"""Real-GPU checks. They skip without CUDA; scripts/gpu_check.sh runs them on a lent GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
import ddpkit.loggers
from ddpkit import Trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ROOT = Path(__file__).resolve().parents[2]


class Regressor(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        assert x.is_cuda, "the trainer must move batches to the rank's GPU"
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _data() -> DataLoader[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=32)


@pytest.mark.parametrize("precision", ["32-true", "16-mixed", "bf16-mixed", "64-true"])
def test_single_gpu_fit(tmp_path: Path, precision: str) -> None:
    model = Regressor()
    trainer = Trainer(
        accelerator="gpu", devices=1, max_epochs=3, precision=precision,
        default_root_dir=tmp_path, enable_progress_bar=False,
    )  # fmt: skip
    assert trainer.root_device == torch.device("cuda", 0)
    trainer.fit(model, _data())
    assert next(model.parameters()).is_cuda
    assert float(trainer.callback_metrics["loss"]) < 5.0
    assert torch.cuda.is_initialized()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn", "ddp_notebook"])
def test_one_gpu_nccl_ddp_fit(tmp_path: Path, strategy: str) -> None:
    """DDP on one GPU with nccl, through a real script run: the subprocess launcher (rank 0 =
    that process), the spawn launcher (the ranks are spawned; the parent gets the result) and
    the fork launcher (forked from a process that has not touched CUDA)."""
    script = tmp_path / "fit.py"
    script.write_text(
        "import sys, torch\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_gpu import Regressor, _data\n"
        "from ddpkit import Trainer\n"
        "if __name__ == '__main__':\n"
        f"    t = Trainer(accelerator='gpu', devices=1, strategy={strategy!r}, max_epochs=2,\n"
        f"                default_root_dir={str(tmp_path)!r}, enable_progress_bar=False)\n"
        "    m = Regressor(); t.fit(m, _data())\n"
        "    assert t.training_type_plugin.backend == 'nccl'\n"
        "    print('OK', float(t.callback_metrics['loss']))\n"
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "OK" in run.stdout


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.timeout(300)
def test_two_gpu_examples(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train.py"), "--variant", "modern",
         "--epochs", "2", "--root-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.timeout(120)
def test_a_fork_after_cuda_is_initialized_is_refused_before_a_rank_starts() -> None:
    """docs/notebooks.md: a forked rank cannot use CUDA once the parent initialized it."""
    code = (
        "import sys, torch\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_gpu import Regressor, _data\n"
        "from ddpkit import Trainer\n"
        "torch.zeros(1, device='cuda')\n"
        "t = Trainer(accelerator='gpu', devices=1, strategy='ddp_notebook', max_epochs=1)\n"
        "t.fit(Regressor(), _data())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100)
    assert run.returncode == 1
    assert "LaunchError: ddp_notebook (fork launcher): CUDA is initialized" in run.stderr
    assert "rank 0 (pid" not in run.stderr  # refused here, not reported from a rank


@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")
def test_log_graph_of_a_gpu_fit_traces_on_the_gpu(tmp_path: Path) -> None:
    """The example input (a CPU tensor) goes to the module's GPU before it is traced, as in
    Lightning's log_graph; a CPU example for a CUDA module failed the fit at its start."""
    pytest.importorskip("tensorboard")
    model = Regressor()
    model.example_input_array = torch.randn(2, 8)
    logger = ddpkit.loggers.TensorBoardLogger(tmp_path, log_graph=True)
    trainer = Trainer(
        accelerator="gpu", devices=1, max_epochs=1, logger=logger,
        default_root_dir=tmp_path, enable_progress_bar=False,
    )  # fmt: skip
    trainer.fit(model, _data())
    assert next(model.parameters()).is_cuda
    assert list(Path(logger.log_dir).glob("events.out.tfevents.*"))
