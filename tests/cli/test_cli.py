"""``ddpkit explain``, ``ddpkit env``, ``ddpkit plot`` and ``ddpkit --version``, as a user runs
them: what they print, what they take, and what they say when the command line is wrong."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddpkit import __version__
from ddpkit._flag_names import ACCELERATOR_NAMES, LEGACY_ACCELERATORS, PRECISIONS, TRAINING_TYPES
from ddpkit.cli import main, parser
from ddpkit.cli._explain import flags_of

Run = subprocess.CompletedProcess[str]
Capture = pytest.CaptureFixture[str]


def test_explain_prints_the_plan(capsys: Capture) -> None:
    code = main(
        ["explain", "--accelerator", "ddp_cpu", "--num-processes", "2",
         "--plugins", "ddp_find_unused_parameters_false"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "training_type   ddp(find_unused_parameters=False)" in out
    assert "launcher        subprocess" in out
    assert (
        "modern call     Trainer(accelerator='cpu', devices=2, "
        "strategy='ddp_find_unused_parameters_false')" in out
    )


def test_explain_shows_the_deprecation_once_as_a_line(capsys: Capture) -> None:
    assert main(["explain", "--accelerator", "ddp_cpu", "--num-processes", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("deprecated:") == 1
    assert "strategy='ddp_spawn_find_unused_parameters_true'" in captured.out
    assert captured.err == ""  # not a second time as a Python warning


@pytest.mark.parametrize(
    "argv",
    [
        ["--accelerator", "ddp_cpu", "--num-processes", "2"],
        ["--accelerator", "ddp_cpu", "--num-processes", "2", "--plugins",
         "ddp_find_unused_parameters_false"],
        ["--devices", "2", "--strategy", "ddp_spawn", "--precision", "bf16-mixed"],
    ],
)  # fmt: skip
def test_plan_lines_fit_in_100_columns(argv: list[str], capsys: Capture) -> None:
    assert main(["explain", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)
    # A wrapped reason goes on under its own column.
    for before, line in itertools.pairwise(lines):
        if line.startswith("      "):
            assert before.rstrip(), before


def test_explain_json(capsys: Capture) -> None:
    assert main(["explain", "--devices", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["launcher"]["value"] == "subprocess"
    assert data["devices"]["indices"] == [0, 1]


def test_version(capsys: Capture) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ddpkit {__version__} (torch ")


def _help(capsys: Capture, *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps: compare words


def test_explain_help_lists_every_allowed_value(capsys: Capture) -> None:
    text = _help(capsys, "explain")
    names = [*ACCELERATOR_NAMES, *LEGACY_ACCELERATORS, *TRAINING_TYPES, *set(PRECISIONS.values())]
    missing = [name for name in names if not re.search(rf"\b{re.escape(name)}\b", text)]
    assert missing == []
    assert "a count (2), device ids (0,1 or [0,1]), -1 for every GPU, or auto" in text


@pytest.mark.parametrize("argv", [[], ["explain"], ["env"], ["plot"]], ids=str)
def test_help_is_plain_text(argv: list[str], capsys: Capture) -> None:
    text = _help(capsys, *argv)
    assert "``" not in text and ":class:" not in text and ":func:" not in text


def test_every_command_is_in_the_top_help(capsys: Capture) -> None:
    text = _help(capsys)
    for command in ("explain", "env", "plot (curves)", "--version", "ddpkit plot runs/"):
        assert command in text


def test_values_reach_the_connector_as_typed() -> None:
    """The CLI passes what was typed; the connector judges it (and quotes that call)."""

    def call(*argv: str) -> str:
        args = parser().parse_args(["explain", *argv])
        return str(flags_of(args).call())

    assert call("--devices", "abc", "--accelerator", "cpu") == (
        "Trainer(accelerator='cpu', devices='abc')"
    )
    assert call("--devices", "[0,1]") == "Trainer(devices=[0, 1])"
    assert call("--devices", "0,1") == "Trainer(devices='0,1')"
    assert call("--gpus", "-1") == "Trainer(gpus=-1)"
    assert call("--num-processes", "x") == "Trainer(num_processes='x')"
    assert call("--precision", "16") == "Trainer(precision=16)"
    assert call("--plugins", "ddp", "x") == "Trainer(plugins=['ddp', 'x'])"
    assert call() == "Trainer()"  # defaults are the connector's, not the CLI's


def test_connector_errors_quote_the_command_and_exit_2(capsys: Capture) -> None:
    assert main(["explain", "--devices", "[0,1]", "--accelerator", "cpu"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        "ddpkit explain --devices '[0,1]' --accelerator cpu: "
        "Trainer(accelerator='cpu', devices=[0, 1]): devices=[0, 1] lists GPU ids"
    )
    assert captured.err.rstrip().endswith("Fix: pass devices=2, or accelerator='gpu'.")


def test_bad_flags_exit_2_with_the_connectors_message(capsys: Capture) -> None:
    assert main(["explain", "--strategy", "dp"]) == 2
    err = capsys.readouterr().err
    assert "strategy='dp' is not supported" in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["explain", "--strategy", "dpp", "--json"], ("MisconfigurationError", "strategy='dpp'")),
        (["explain", "--acelerator", "cpu", "--json"], ("UsageError", "--accelerator")),
        (["explain", "--num-nodes", "--json"], ("UsageError", "--num-nodes")),
        (["env", "--json", "--extra"], ("UsageError", "--extra")),
    ],
    ids=["connector", "unknown-option", "missing-value", "env"],
)
def test_json_errors_are_json_on_stdout(
    argv: list[str], expected: tuple[str, str], capsys: Capture
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == ""
    error = json.loads(captured.out)["error"]
    assert error["type"] == expected[0]
    assert error["command"] == "ddpkit " + " ".join(argv)
    assert expected[1] in error["message"]
    assert re.search(r"Fix: |Choose one of ", error["message"])  # it ends with what to do


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["explian"], "ddpkit explian: 'explian' is not a ddpkit command. "
                      "Fix: did you mean ddpkit explain?"),
        (["frobnicate"], "ddpkit frobnicate: 'frobnicate' is not a ddpkit command. "
                         "Fix: use one of explain, env, plot"),
        (["explain", "--acelerator", "cpu"], "ddpkit explain --acelerator cpu: unknown option "
                                             "--acelerator. Fix: did you mean --accelerator?"),
        (["explain", "--devices", "2", "--jsn"], "unknown option --jsn. Fix: did you mean --json?"),
        (["env", "--zzz"], "ddpkit env --zzz: unknown option --zzz. "
                           "Fix: ddpkit env --help lists the options"),
        (["explain", "--num-nodes"], "ddpkit explain --num-nodes: argument --num-nodes: expected "
                                     "one argument. Fix: ddpkit explain --help says what it takes"),
        ([], "ddpkit: no command given. Fix: name one, for instance ddpkit explain --devices 2"),
        (["plot"], "ddpkit plot: the following arguments are required: METRICS_CSV. "
                   "Fix: ddpkit plot --help says what it takes"),
    ],
    ids=["command-typo", "command-unknown", "option-typo", "option-typo-2", "option-unknown",
         "missing-value", "no-command", "plot-no-file"],
)  # fmt: skip
def test_usage_errors_quote_the_command_and_end_with_a_fix(
    argv: list[str], expected: str, capsys: Capture
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert expected in captured.err
    assert "usage:" not in captured.err and "Traceback" not in captured.err


# The connector judges the values and words the message (a did-you-mean for the closed sets,
# the whole call for device flags); the CLI only passes them through as typed.
@pytest.mark.parametrize(
    ("flag", "typo", "meant"),
    [
        ("--accelerator", "cpuu", "cpu"),
        ("--strategy", "dpp", "ddp"),
        ("--precision", "16-mix", "16-mixed"),
        ("--plugins", "ddp_spwan", "ddp_spawn"),
    ],
)
def test_typos_in_closed_sets_get_a_did_you_mean(
    flag: str, typo: str, meant: str, capsys: Capture
) -> None:
    assert main(["explain", flag, typo]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"did you mean\b[^.?]*\b{re.escape(meant)}\b", err, re.I), err


def test_a_bad_device_flag_quotes_the_whole_call_and_a_fix(capsys: Capture) -> None:
    assert main(["explain", "--devices", "abc", "--accelerator", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "Trainer(accelerator='cpu', devices='abc')" in err
    assert "Fix:" in err


def test_env_json(capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.setenv(key, "0" if "RANK" in key else "1")
    assert main(["env", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["environment"] == "torchelastic"
    assert data["environment_variables"]["WORLD_SIZE"] == "1"
    assert data["cuda_device_count"] == 0


@pytest.mark.timeout(60)
def test_console_entry_points() -> None:
    """`python -m ddpkit` and the installed `ddpkit` script both work."""
    run: Run = subprocess.run(
        [sys.executable, "-m", "ddpkit", "explain", "--num-processes", "2"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "training_type   ddp_spawn" in run.stdout
    script = subprocess.run(
        [str(Path(sys.executable).with_name("ddpkit")), "--version"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert script.returncode == 0, script.stderr
    assert script.stdout.startswith(f"ddpkit {__version__} ")


@pytest.mark.timeout(60)
def test_a_reader_that_stops_early_ends_the_command_quietly() -> None:
    """`ddpkit ... --json | head -0`: the pipe is closed before ddpkit writes; no traceback, and
    the status a shell shows for SIGPIPE. (A mistyped flag with --json: its answer goes to
    stdout without importing torch.)"""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddpkit", "explain", "--devces", "2", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=50) == 141, err
    assert err == ""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["explain", "--help"],
        ["explian"],
        ["explain", "--devces", "2"],
        ["run", "--help"],
        ["run", "--nnodes", "2", "x.py"],
    ],
    ids=" ".join,
)
def test_answers_without_importing_torch(argv: list[str]) -> None:
    """--version, --help and a mistyped command line answer without torch (a second a call)."""
    probe = (
        "import sys\n"
        "from ddpkit.cli import main\n"
        "try:\n"
        f"    code = main({argv!r})\n"
        "except SystemExit as done:\n"
        "    code = done.code\n"
        "print('exit', code, 'torch' in sys.modules)\n"
    )
    run: Run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] in ("exit 0 False", "exit 2 False"), run.stdout
