"""Time to end after each fault, for both launchers, and what the user sees.

    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.reliability            # 5 runs a case
    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.reliability --runs 1 --only spawn

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
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))

from fault_scripts.harness import FaultRun, run_fault  # noqa: E402

from ddpkit.ranks.scratch import sweep_stale_dirs  # noqa: E402

DOC = REPO / "docs" / "reliability.md"
START, END = "<!-- bench:reliability:start -->", "<!-- bench:reliability:end -->"
STALL_TIMEOUT = 3.0


@dataclass(frozen=True)
class Case:
    label: str
    launcher: str
    fault: str
    rank: int = 1
    signal_parent: int | None = None
    stall_timeout: float | None = None
    target: str = ""


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


def what_the_user_sees(run: FaultRun) -> str:
    """The exit status and the first line of what ddpkit printed, pids elided."""
    text = run.stderr.replace("[rank0]: ", "")
    line = ""
    for pattern in (
        r"ChildFailedError: (.*)",
        r"ddpkit: (SIG\w+: every rank .*)",
        r"^(RuntimeError: injected fault on rank 0)$",
    ):
        m = re.search(pattern, text, re.MULTILINE)
        if m:
            line = m.group(1).strip()
            break
    line = re.sub(r"pid \d+", "pid …", line)
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
            run = run_fault(
                case.launcher,
                case.fault,
                case.rank,
                signal_parent=case.signal_parent,
                stall_timeout=case.stall_timeout,
                timeout=120,
                tmpdir=private,
            )
            files |= {_kind(private / name) for name in run.litter}
            if run.litter:
                # Measured right after the fault, the leftover counts above; whether the sweep
                # that every next launch runs first removes it is measured here.
                leftovers = {private / name for name in run.litter}
                swept += set(sweep_stale_dirs(private)) == leftovers
        if run.seconds_to_end is not None and not run.timed_out:
            times.append(run.seconds_to_end)
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
        else:
            timing = "did not end"
        seen = seen.replace("|", "\\|")
        lines.append(
            f"| {case.label} | {case.launcher} | {case.target} | {timing} | {left} | {seen} |"
        )
    return "\n".join(lines)


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    if START not in doc or END not in doc:
        raise SystemExit(f"{DOC} has no {START} ... {END} markers")
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="", help="a regular expression on 'launcher/fault'")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    rows = []
    for case in CASES:
        if args.only and not re.search(args.only, f"{case.launcher}/{case.label}"):
            continue
        rows.append((case, *measure(case, args.runs)))
    text = table(rows, args.runs)
    machine = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
    import torch

    text += f"\n\nMeasured on {machine}, torch {torch.__version__}, CPU ranks with gloo."
    print(text)
    if not args.no_write and not args.only:
        write_doc(text)


if __name__ == "__main__":
    main()
