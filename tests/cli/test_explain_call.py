"""``ddpkit explain`` on the call as the user wrote it, on their script, and for a machine other
than this one (a GPU box, a SLURM job, torchrun) — read with ast, never run."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from ddpkit.cli import main

Capture = pytest.CaptureFixture[str]

CALL = "Trainer(accelerator='ddp_cpu', num_processes=2, plugins=[DDPPlugin(find_unused_parameters=False)])"


def _explain(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(["explain", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_call_as_written(capsys: Capture) -> None:
    code, out, err = _explain(capsys, CALL)
    assert code == 0, err
    words = " ".join(out.split())
    assert words.startswith(
        "plan for Trainer(accelerator='ddp_cpu', num_processes=2, "
        "plugins=[DDPPlugin(find_unused_parameters=False)])"
    )
    assert "training_type DDPPlugin(find_unused_parameters=False) passed in plugins=" in words
    assert "launcher subprocess" in words
    # The same plan as the flags spell it.
    assert _explain(capsys, "--accelerator", "ddp_cpu", "--num-processes", "2", "--plugins",
                    "ddp_find_unused_parameters_false")[0] == 0  # fmt: skip


SCRIPT = """
    import argparse
    from datetime import timedelta
    from ddpkit import DDPPlugin, Trainer

    def main(args):
        fast = Trainer(accelerator="gpu", devices=4,
                       max_epochs=args.epochs, callbacks=[])
        slow = Trainer(num_processes=2, plugins=[DDPPlugin(timeout=timedelta(minutes=5))])
"""


def test_a_script_each_call_with_its_line(capsys: Capture, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    code, out, err = _explain(capsys, str(script), "--cuda-devices", "4")
    assert code == 0, err
    blocks = out.split("\n\n")
    assert blocks[0] == f"{script}: 2 Trainer(...) calls, each planned below."
    first, second = blocks[1].splitlines(), blocks[2].splitlines()
    assert first[0] == (
        f"{script}, line 7: Trainer(accelerator='gpu', devices=4, max_epochs=args.epochs, "
        f"callbacks=[])"
    )
    assert first[1] == "planned for a machine with 4 CUDA devices"
    assert first[2] == "plan for Trainer(accelerator='gpu', devices=4)"
    assert "cuda:0, cuda:1, cuda:2, cuda:3" in blocks[1] and "nccl" in blocks[1]
    assert first[-1] == "  other keywords  max_epochs, callbacks (not part of the plan)"
    assert second[0].startswith(f"{script}, line 9: Trainer(num_processes=2, ")
    assert "DDPPlugin(find_unused_parameters=True, timeout=300)" in blocks[2]


def test_json_for_a_script(capsys: Capture, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("from ddpkit import Trainer\ntrainer = Trainer(devices=2)\n")
    code, out, _ = _explain(capsys, str(script), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["where"] == f"{script}, line 2"
    assert data["plan"]["launcher"]["value"] == "subprocess"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Trainer(devices=n)", "Trainer(devices=n): n is not a value ddpkit explain can know "
         "before the script runs. Fix: write the value it has into the call: ddpkit explain "
         '"Trainer(devices=...)"'),
        ("Trainer(2)", "Trainer(2) passes 1 positional argument(s); the Trainer takes keywords"),
        ("Trainer(**flags)", "passes **keywords, whose values ddpkit explain cannot know"),
        ("fit(devices=2)", "is not a Trainer(...) call. Fix: pass the call as written"),
        ("Trainer(devices=2", "is not a Python call"),
        ("Trainer(plugins=[DDPPlugin(timeout='abc')])", "DDPPlugin(timeout='abc'): timeout must "
         "be a number of seconds or a datetime.timedelta"),
    ],
    ids=["variable", "positional", "kwargs", "not-a-trainer", "syntax", "plugin-check"],
)  # fmt: skip
def test_what_cannot_be_read_is_named_with_a_fix(capsys: Capture, text: str, message: str) -> None:
    code, out, err = _explain(capsys, text)
    assert code == 2 and out == ""
    assert message in err, err


def test_nothing_of_the_call_runs(capsys: Capture, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = f"Trainer(devices=__import__('pathlib').Path({str(marker)!r}).touch())"
    code, _, err = _explain(capsys, evil)
    assert code == 2
    assert "calls touch, which ddpkit explain does not run" in err
    assert not marker.exists()
    code, _, err = _explain(capsys, "Trainer(plugins=[open('/etc/passwd')])")
    assert code == 2 and "calls open" in err


def test_a_script_without_a_trainer_call(capsys: Capture, tmp_path: Path) -> None:
    script = tmp_path / "other.py"
    script.write_text("print('no trainer here')\n")
    code, _, err = _explain(capsys, str(script))
    assert code == 2 and f"{script}: no Trainer(...) call in it" in err
    assert _explain(capsys, str(tmp_path / "missing.py"))[0] == 2


def test_the_call_and_its_flags_together_are_refused(capsys: Capture) -> None:
    code, _, err = _explain(capsys, "Trainer(devices=2)", "--accelerator", "cpu")
    assert code == 2 and "give the call or its flags, not both" in err


def test_a_gpu_box_planned_from_here(capsys: Capture) -> None:
    call = "Trainer(accelerator='gpu', devices=4)"
    code, _, err = _explain(capsys, call)
    assert code == 2 and "GPU" in err  # this machine has none
    code, out, err = _explain(capsys, call, "--cuda-devices", "4")
    assert code == 0, err
    assert out.splitlines()[0] == "planned for a machine with 4 CUDA devices"
    assert "world_size      4" in out and "backend         nccl" in out


def test_a_slurm_job_as_sbatch_spells_it(capsys: Capture) -> None:
    call = "Trainer(accelerator='gpu', devices=4, num_nodes=2)"
    for options in ("nodes=2,ntasks-per-node=4,gpus-per-node=4",
                    "--nodes=2 --ntasks_per_node 4 --gpus-per-node=4"):  # fmt: skip
        code, out, err = _explain(capsys, call, "--slurm", options)
        assert code == 0, err
        assert out.splitlines()[0] == (
            "planned for a machine with 4 CUDA devices, as task 0 of an srun step of 8 (2 nodes "
            "× 4)"
        )
        assert "launcher        external" in out and "environment     slurm" in out
    # the machine and the call disagree: the connector says so, as it would on the cluster
    code, _, err = _explain(capsys, call, "--slurm", "nodes=2,ntasks=4", "--cuda-devices", "4")
    assert code == 2 and "devices(4) × num_nodes(2) = 8" in err, err


def test_torchrun_as_it_is_spelled(capsys: Capture) -> None:
    call = "Trainer(accelerator='ddp_cpu', num_processes=4, num_nodes=2)"
    code, out, err = _explain(capsys, call, "--torchrun", "nnodes=2,nproc_per_node=4")
    assert code == 0, err
    assert "rank 0 of torchrun's 8 (2 nodes × 4)" in out.splitlines()[0]
    assert "environment     torchelastic" in out and "world_size      8" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--slurm", "nodse=2"], "--slurm 'nodse=2': nodse is not one of its options. Fix: did "
         "you mean nodes?"),
        (["--slurm", "nodes=2,ntasks=3"], "ntasks=3 does not share out evenly over nodes=2"),
        (["--torchrun", "nnodes=1:4"], "an elastic range has no one world size to plan for"),
        (["--torchrun", "nnodes=2,node-rank=2"], "the nodes are numbered 0 to 1"),
        (["--cuda-devices", "four"], "--cuda-devices N=four: must be a whole number ≥ 0"),
        (["--slurm", "nodes=2", "--torchrun", "nnodes=2"], "a rank is started by one of them"),
    ],
    ids=["typo", "uneven", "elastic", "node-rank", "not-a-number", "both"],
)  # fmt: skip
def test_machine_options_that_cannot_be_read(
    capsys: Capture, argv: list[str], message: str
) -> None:
    code, _, err = _explain(capsys, "Trainer(devices=2)", *argv)
    assert code == 2 and message in err, err
