"""Time to end after each fault, for both launchers, and what the user sees.

    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.reliability            # 5 runs a case
    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.reliability --runs 1 --only spawn
    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.reliability --suite lightning

``--suite restart`` measures restarts (``max_restarts``) instead: the time from a SIGKILLed rank
to the first training step after it (:mod:`bench.restarts`), into the table between the
``bench:reliability-restart`` markers.

``--suite lightning`` runs the same faults on a Lightning module trained by Lightning 2.x under
ddpkit's supervision (``tests/lightning/scripts/lit_faulty.py``: ``ddpkit.lightning.Trainer(...)``
with 1.x device flags, supervised by default), plus a busy ``MASTER_PORT``, into the table between
the ``bench:reliability-lightning`` markers.

Each run is ``tests/integration/fault_scripts/faulty_run.py`` (two CPU ranks, gloo) in a session
of its own, driven by the fault-injection tests' harness. The clock starts at the fault (the
faulting rank's own timestamp just before it raises, kills itself or starts looping; or the
moment the harness signals the parent) and stops when no process of the session is left. For a
stall, the time includes the stall timeout (3 s here). The table goes into ``docs/reliability.md``
between its ``bench:reliability`` markers.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))

from fault_scripts.harness import SCRIPT, FaultRun, run_fault  # noqa: E402

from ddpkit._runtime.ranks._scratch import sweep_stale_dirs  # noqa: E402

DOC = REPO / "docs" / "reliability.md"
MARKERS = {
    "ddpkit": ("<!-- bench:reliability:start -->", "<!-- bench:reliability:end -->"),
    "restart": (
        "<!-- bench:reliability-restart:start -->",
        "<!-- bench:reliability-restart:end -->",
    ),
    "lightning": (
        "<!-- bench:reliability-lightning:start -->",
        "<!-- bench:reliability-lightning:end -->",
    ),
}
START, END = MARKERS["ddpkit"]
STALL_TIMEOUT = 3.0
LIGHTNING_SCRIPT = REPO / "tests" / "lightning" / "scripts" / "lit_faulty.py"


@dataclass(frozen=True)
class Case:
    label: str
    launcher: str
    fault: str
    rank: int = 1
    signal_parent: int | None = None
    stall_timeout: float | None = None
    target: str = ""
    #: "ddpkit" (faulty_run.py, ddpkit's Trainer) or "lightning" (lit_faulty.py)
    script: str = "ddpkit"
    #: run with MASTER_PORT set to a port another process listens on
    busy_port: bool = False


CASES = [
    Case("rank 1 raises", "subprocess", "raise", target="2 s"),
    Case("rank 1 raises", "spawn", "raise", target="2 s"),
    Case("rank 1 SIGKILLed", "subprocess", "kill", target="2 s"),
    Case("rank 1 SIGKILLed", "spawn", "kill", target="2 s"),
    Case("rank 0 raises", "subprocess", "raise", rank=0, target="2 s"),
    Case("rank 0 raises", "spawn", "raise", rank=0, target="2 s"),
    Case("parent SIGKILLed", "subprocess", "none", signal_parent=signal.SIGKILL, target="3 s"),
    Case("parent SIGKILLed", "spawn", "none", signal_parent=signal.SIGKILL, target="3 s"),
    Case("SIGINT to parent", "subprocess", "none", signal_parent=signal.SIGINT, target="3 s"),
    Case("SIGINT to parent", "spawn", "none", signal_parent=signal.SIGINT, target="3 s"),
    Case("SIGTERM to parent", "subprocess", "none", signal_parent=signal.SIGTERM, target="3 s"),
    Case("SIGTERM to parent", "spawn", "none", signal_parent=signal.SIGTERM, target="3 s"),
    Case("rank 1 stalls", "subprocess", "stall", stall_timeout=STALL_TIMEOUT, target="timeout"),
    Case("rank 1 stalls", "spawn", "stall", stall_timeout=STALL_TIMEOUT, target="timeout"),
]


def _lightning(case: Case) -> Case:
    return Case(
        case.label,
        case.launcher,
        case.fault,
        case.rank,
        case.signal_parent,
        case.stall_timeout,
        case.target,
        script="lightning",
    )


LIGHTNING_CASES = [
    *(_lightning(case) for case in CASES),
    Case(
        "MASTER_PORT busy", "subprocess", "ok", target="no rank", script="lightning", busy_port=True
    ),
    Case("MASTER_PORT busy", "spawn", "ok", target="no rank", script="lightning", busy_port=True),
]
SUITES = {"ddpkit": CASES, "lightning": LIGHTNING_CASES, "restart": []}


def what_the_user_sees(run: FaultRun) -> str:
    """The exit status and the first line of what ddpkit printed, pids elided."""
    text = run.stderr.replace("[rank0]: ", "")
    line = ""
    for pattern in (
        r"ChildFailedError: (.*)",
        r"ddpkit: (SIG\w+: every rank .*)",
        r"^(RuntimeError: injected fault on rank 0)$",
        r"(LaunchError: .*)",
    ):
        m = re.search(pattern, text, re.MULTILINE)
        if m:
            line = m.group(1).strip()
            break
    line = re.sub(r"pid \d+", "pid …", line)
    line = re.sub(r"(MASTER_PORT=|127\.0\.0\.1:)\d+", r"\1…", line)  # a free port of the run
    line = re.sub(r"\d+\.\d s", "… s", line)
    if len(line) > 150:
        line = line[:147] + "..."
    status = run.returncode
    if status is not None and status < 0:
        shown = f"killed by {signal.Signals(-status).name}"
    else:
        shown = f"exit {status}"
    return f"{shown}; {line}" if line else shown


def measure(case: Case, runs: int) -> tuple[list[float], str, str]:
    times: list[float] = []
    seen = ""
    survivors = litter = swept = 0
    files: set[str] = set()
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-reliability-") as tmp:
            private = Path(tmp) / "tmp"
            private.mkdir()
            run = _run(case, private)
            files |= {_kind(private / name) for name in run.litter}
            if run.litter:
                # Measured right after the fault, the leftover counts above; whether the sweep
                # that every next launch runs first removes it is measured here.
                leftovers = {private / name for name in run.litter}
                swept += set(sweep_stale_dirs(private)) == leftovers
        if run.seconds_to_end is not None and not run.timed_out:
            times.append(run.seconds_to_end)
        if case.busy_port and run.ranks:
            survivors += 1  # a rank was started although the port was taken
        survivors += bool(run.survivors or run.timed_out)
        litter += bool(run.litter)
        seen = seen or what_the_user_sees(run)
        sys.stderr.write(
            f"{case.launcher:10} {case.label:18} {run.seconds_to_end or float('nan'):6.2f} s "
            f"status {run.returncode} survivors {run.survivors} litter {run.litter}\n"
        )
    left = []
    if survivors:
        left.append(f"processes in {survivors} run(s)")
    if litter:
        left.append(
            f"{', '.join(sorted(files))} in {litter} run(s); the sweep a next launch starts "
            f"with removed it in {swept}"
        )
    return times, seen, "; ".join(left) or "nothing"


def _run(case: Case, private: Path, env: dict[str, str] | None = None) -> FaultRun:
    if case.busy_port and env is None:
        with socket.socket() as taken:  # held for the whole run
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            return _run(case, private, {**os.environ, "MASTER_PORT": str(taken.getsockname()[1])})
    return run_fault(
        case.launcher,
        case.fault,
        case.rank,
        signal_parent=case.signal_parent,
        stall_timeout=case.stall_timeout,
        timeout=120,
        tmpdir=private,
        script=LIGHTNING_SCRIPT if case.script == "lightning" else SCRIPT,
        env=env,
    )


def _kind(path: Path) -> str:
    """'a ddpkit-* dir (0700, empty)': what a leftover is, not its random name."""
    name = re.sub(r"^(ddpkit-).*", r"\1*", path.name)
    if path.is_dir():
        mode = oct(path.stat().st_mode & 0o777)[2:]
        content = "empty" if not any(path.iterdir()) else "not empty"
        return f"a {name} dir ({mode}, {content})"
    return f"a {name} file"


def table(rows: list[tuple[Case, list[float], str, str]], runs: int) -> str:
    lines = [
        f"| fault | launcher | target | time to end, s (min / median / max of {runs}) "
        f"| left running or on disk | what the user sees |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for case, times, seen, left in rows:
        if times:
            timing = f"{min(times):.2f} / {statistics.median(times):.2f} / {max(times):.2f}"
        elif case.busy_port:
            timing = "fails before any rank starts"
        else:
            timing = "did not end"
        seen = seen.replace("|", "\\|")
        lines.append(
            f"| {case.label} | {case.launcher} | {case.target} | {timing} | {left} | {seen} |"
        )
    return "\n".join(lines)


def write_doc(text: str, suite: str = "ddpkit") -> None:
    start, end = MARKERS[suite]
    doc = DOC.read_text()
    if start not in doc or end not in doc:
        raise SystemExit(f"{DOC} has no {start} ... {end} markers")
    head, rest = doc.split(start, 1)
    _, tail = rest.split(end, 1)
    DOC.write_text(f"{head}{start}\n{text}\n{end}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="", help="a regular expression on 'launcher/fault'")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--suite", choices=sorted(SUITES), default="ddpkit")
    args = parser.parse_args()
    if args.suite == "restart":
        from bench.restarts import restart_table

        _finish(restart_table(args.runs, args.only), args)
        return
    rows = []
    for case in SUITES[args.suite]:
        if args.only and not re.search(args.only, f"{case.launcher}/{case.label}"):
            continue
        rows.append((case, *measure(case, args.runs)))
    _finish(table(rows, args.runs), args)


def _finish(text: str, args: argparse.Namespace) -> None:
    """The machine under the table; the table into docs/reliability.md (a whole suite only)."""
    machine = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
    import torch

    text += f"\n\nMeasured on {machine}, torch {torch.__version__}, CPU ranks with gloo"
    if args.suite in ("lightning", "restart"):
        import pytorch_lightning

        text += f", pytorch-lightning {pytorch_lightning.__version__}"
    text += "."
    print(text)
    if not args.no_write and not args.only:
        write_doc(text, args.suite)


if __name__ == "__main__":
    main()
