"""DDP from a real Jupyter notebook (docs/notebooks.md): cells that define a ``ddpkit.Module``
and a ``LightningModule`` fit on 2 CPU ranks — ``strategy="ddp_notebook"`` and 1.x's
``accelerator="ddp_cpu", num_processes=2`` — in a kernel started by jupyter_client, as Jupyter
starts one; a rank that raises ends the fit with the short report and the kernel fits again; an
interrupted or killed kernel leaves no rank behind; the weights are those of the same model
trained by a script with subprocess DDP."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kernel import RESULT, Kernel, error, gone_within, results, run_notebook, wait_for_files

from ddpkit._runtime.ranks._scratch import sweep_stale_dirs

pytest.importorskip("nbclient", reason="the notebook extra: pip install -e '.[notebook]'")
pytest.importorskip("pytorch_lightning", reason="the lightning extra")

#: Defined in a cell (their module is the notebook's __main__, which no spawned rank can import).
MODELS = textwrap.dedent(
    """
    import json, os, time
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    import ddpkit
    import ddpkit.lightning as pl

    RESULT = "RESULT "

    def loader():
        g = torch.Generator().manual_seed(0)
        x = torch.randn(96, 6, generator=g)
        y = (x[:, :3].sum(1, keepdim=True) > 0).float()
        return DataLoader(TensorDataset(x, y), batch_size=8)

    def body():
        torch.manual_seed(1)
        return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))

    class Net(ddpkit.Module):
        def __init__(self, fail_on_rank=None, pid_dir=None):
            super().__init__()
            self.body = body()
            self.fail_on_rank, self.pid_dir = fail_on_rank, pid_dir

        def training_step(self, batch, batch_idx):
            if self.pid_dir is not None:  # the test's handle on the ranks; then a long step
                with open(os.path.join(self.pid_dir, f"{self.global_rank}.pid"), "w") as f:
                    f.write(str(os.getpid()))
                time.sleep(600)
            if self.global_rank == self.fail_on_rank and batch_idx == 2:
                raise ValueError("rank 1 says no")
            x, y = batch
            loss = nn.functional.binary_cross_entropy_with_logits(self.body(x), y)
            self.log("train_loss", loss, on_step=False, on_epoch=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class LitNet(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.body = body()

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = nn.functional.binary_cross_entropy_with_logits(self.body(x), y)
            self.log("train_loss", loss, on_step=False, on_epoch=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def weights(model):
        return [p.detach().flatten().tolist() for p in model.parameters()]

    def report(name, model, trainer):
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
        print(RESULT + json.dumps({"name": name, "weights": weights(model), "metrics": metrics,
                                   "epoch": trainer.current_epoch, "step": trainer.global_step}))

    QUIET = dict(max_epochs=2, enable_progress_bar=False, enable_model_summary=False)
    """
)

#: The fits, one cell each, as a notebook's user writes them.
FITS = {
    "module/ddp_notebook": """
        model, trainer = Net(), ddpkit.Trainer(accelerator="cpu", devices=2,
                                               strategy="ddp_notebook", **QUIET)
        trainer.fit(model, loader())
        report("module/ddp_notebook", model, trainer)
    """,
    "module/ddp_cpu": """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer = ddpkit.Trainer(accelerator="ddp_cpu", num_processes=2, **QUIET)
        print(RESULT + json.dumps([str(w.message) for w in caught]))
        model = Net()
        trainer.fit(model, loader())
        report("module/ddp_cpu", model, trainer)
    """,
    "lightning/ddp_notebook": """
        model, trainer = LitNet(), pl.Trainer(accelerator="cpu", devices=2,
                                              strategy="ddp_notebook", logger=False, **QUIET)
        trainer.fit(model, loader())
        report("lightning/ddp_notebook", model, trainer)
    """,
    "lightning/ddp_cpu": """
        model = LitNet()
        trainer = pl.Trainer(accelerator="ddp_cpu", num_processes=2, logger=False, **QUIET)
        trainer.fit(model, loader())
        report("lightning/ddp_cpu", model, trainer)
    """,
}

FAILING = """
    trainer = ddpkit.Trainer(accelerator="cpu", devices=2, strategy="ddp_notebook", **QUIET)
    trainer.fit(Net(fail_on_rank=1), loader())
"""

#: The same models trained by a script, ranks started by the subprocess launcher.
SCRIPT = MODELS + textwrap.dedent(
    """
        if __name__ == "__main__":
            out = {}
            model = Net()
            trainer = ddpkit.Trainer(accelerator="cpu", devices=2, strategy="ddp", **QUIET)
            trainer.fit(model, loader())
            out["module"] = weights(model)
            model = LitNet()
            trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", logger=False,
                                 supervise=True, **QUIET)
            trainer.fit(model, loader())
            out["lightning"] = weights(model)
            if trainer.is_global_zero:
                print(RESULT + json.dumps(out))
        """
)


def _script_weights(tmp_path: Path) -> dict[str, list[list[float]]]:
    script = tmp_path / "train_script.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    assert len(lines) == 1, done.stdout[-3000:]
    return dict(json.loads(lines[0][len(RESULT) :]))


@pytest.mark.timeout(600)
def test_notebook_cells_fit_on_two_ranks_and_match_a_script(tmp_path: Path) -> None:
    # A matmul first: the kernel's OpenMP pool is running when the ranks are forked.
    warm = "torch.mm(torch.randn(256, 256), torch.randn(256, 256)); None"
    cells = [MODELS, warm, *(textwrap.dedent(c) for c in FITS.values())]
    cells += [textwrap.dedent(FAILING), textwrap.dedent(FITS["module/ddp_notebook"])]
    outputs = run_notebook(cells, tmp_path)
    fits = outputs[2 : 2 + len(FITS)]
    for name, cell in zip(FITS, fits, strict=True):
        assert error(cell) is None, (name, error(cell))
    reports = {r["name"]: r for cell in fits for r in results(cell) if isinstance(r, dict)}
    assert set(reports) == set(FITS)
    for name, report in reports.items():
        assert (report["epoch"], report["step"]) == (2, 12), name  # 96 rows / 2 ranks / 8
        assert 0 < report["metrics"]["train_loss"] < 1, name
    # 1.x's ddp_cpu default: forked in a notebook, said in one line.
    caught = next(r for r in results(fits[1]) if isinstance(r, list))
    assert [m for m in caught if "interactive session" in m] != [], caught
    # A rank that raises: the kernel gets the short report, naming the rank and its error.
    failed = error(outputs[-2])
    assert failed is not None and failed["ename"] == "ChildFailedError", failed
    assert "rank 1" in failed["evalue"] and "ValueError: rank 1 says no" in failed["evalue"]
    assert len("".join(failed["traceback"]).splitlines()) < 60, failed["traceback"]
    # ... and the kernel lives on: the same fit again, on new ranks, the same weights.
    again = results(outputs[-1])
    assert (
        error(outputs[-1]) is None
        and again[0]["weights"] == reports["module/ddp_notebook"]["weights"]
    )
    # The same models, trained by a script with subprocess DDP: the same weights.
    script = _script_weights(tmp_path)
    assert reports["module/ddp_notebook"]["weights"] == script["module"]
    assert reports["module/ddp_cpu"]["weights"] == script["module"]
    assert reports["lightning/ddp_notebook"]["weights"] == script["lightning"]
    assert reports["lightning/ddp_cpu"]["weights"] == script["lightning"]


@pytest.mark.timeout(300)
def test_an_interrupted_or_killed_kernel_leaves_no_rank(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path)
    try:
        kernel.run(MODELS)
        slow = (
            'ddpkit.Trainer(accelerator="cpu", devices=2, strategy="ddp_notebook", **QUIET)'
            '.fit(Net(pid_dir="{}"), loader())'
        )
        first = tmp_path / "first"
        first.mkdir()
        msg = kernel.start(slow.format(first))
        ranks = wait_for_files(first, 2)
        kernel.manager.interrupt_kernel()  # the notebook's stop button: SIGINT to the kernel
        reply = kernel.reply(msg)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert gone_within(ranks, 10), ranks
        # The kernel lives on: a fit again, on a new port.
        kernel.run('ddpkit.Trainer(accelerator="cpu", devices=2, strategy="ddp_notebook", '
                   '**QUIET).fit(Net(), loader())')  # fmt: skip
        second = tmp_path / "second"
        second.mkdir()
        kernel.start(slow.format(second))
        ranks = wait_for_files(second, 2)
        kernel_pid = kernel.pid()
        kernel.shutdown(now=True)  # restart / shut down: the kernel is killed outright
        assert gone_within([kernel_pid, *ranks], 10), ranks
        # A killed launcher cannot remove its scratch folder: the next launch's sweep does.
        assert [p.name for p in sweep_stale_dirs()] != []
    finally:
        kernel.shutdown(now=True)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("code", "ename", "says"),
    [
        (  # subprocess DDP named: no script to re-run
            'ddpkit.Trainer(accelerator="cpu", devices=2, strategy="ddp").fit(Net(), loader())',
            "MisconfigurationError",
            "strategy='ddp_notebook'",
        ),
        (  # spawn named, with a class of the notebook: refused before any rank starts
            'ddpkit.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", **QUIET)'
            ".fit(Net(), loader())",
            "LaunchError",
            "cannot import what this session defined in __main__ (a notebook's cells, a shell)"
            ": Net. Fix: strategy='ddp_notebook'",
        ),
        (  # a process group in the kernel already: a forked rank would inherit it
            "import torch.distributed as dist\n"
            "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:0', rank=0, "
            "world_size=1)\n"
            'ddpkit.Trainer(accelerator="cpu", devices=2, strategy="ddp_notebook", **QUIET)'
            ".fit(Net(), loader())",
            "LaunchError",
            "in a torch.distributed process group already",
        ),
    ],
    ids=["ddp", "spawn-main-class", "process-group"],
)
def test_what_cannot_run_in_a_notebook_is_refused_before_a_rank_starts(
    tmp_path: Path, code: str, ename: str, says: str
) -> None:
    outputs = run_notebook([MODELS, code, "print(RESULT + json.dumps('alive'))"], tmp_path)
    failed = error(outputs[1])
    assert failed is not None and failed["ename"] == ename, failed
    assert says in failed["evalue"], failed["evalue"]  # raised here, not a rank's report
    assert results(outputs[2]) == ["alive"]  # the kernel lives on
