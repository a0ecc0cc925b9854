"""``ddpkit run`` against torchrun: the same raw torch.distributed script, the same faults.

    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.run_vs_torchrun             # 3 runs a case
    flock /tmp/ddpkit-cpu.lock .venv/bin/python -m bench.run_vs_torchrun --runs 1 --no-doc

Each run starts ``tests/integration/fault_scripts/raw_dist.py`` (two CPU ranks, gloo) under
``python -m ddpkit run --nproc-per-node 2`` or ``python -m torch.distributed.run --standalone
--nproc-per-node 2``, in a session of its own. The clock starts at the fault (the faulting rank's
own timestamp; for "launcher SIGKILLed", the moment the bench kills the launcher) and stops when
no process of the run is left (every process of a run carries a tag on its command line), or at
the cap (then the run is ended by the bench and the row says so). "root cause shown": the
launcher's own report names rank 1 and its exception (a rank's own traceback on its stderr does
not count: with several ranks it is one of many lines). "left": processes of the run still
alive 3 s after the launcher exited. The table goes into ``docs/reliability.md`` between its
``bench:run-vs-torchrun`` markers.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tests" / "integration" / "fault_scripts" / "raw_dist.py"
DOC = REPO / "docs" / "reliability.md"
START, END = "<!-- bench:run-vs-torchrun:start -->", "<!-- bench:run-vs-torchrun:end -->"
STALL_TIMEOUT = 5.0
CAP = 40.0
LAUNCHERS = {
    "ddpkit run": [sys.executable, "-m", "ddpkit", "run", "--nproc-per-node", "2",
                   "--stall-timeout", f"{STALL_TIMEOUT:g}"],
    "torchrun": [sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc-per-node", "2"],
}  # fmt: skip
CASES = {
    "rank 1 raises": "raise",
    "rank 1 SIGKILLed": "kill",
    "rank 1 stalls": "stall",
    "launcher SIGKILLed": "none",
}
_FAULT_AT = re.compile(r"raw: fault \w+ rank 1 at ([0-9.]+)")


@dataclass(frozen=True)
class Result:
    seconds: float | None  # None: still running at the cap
    exit: str
    root_cause: str
    left: int


def _tagged(tag: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _root_cause(output: str, fault: str) -> str:
    """What the launcher's own report says of rank 1 (the faulting rank)."""
    if "ddpkit run failed: rank 1 (pid" in output:
        report = output.split("ddpkit run failed: ", 1)[1]
        shown = "injected fault on rank 1" in report or "SIGKILL" in report
        shown = shown or "never arrived" in report
        return (
            "rank 1 and its " + ("exception" if fault == "raise" else "end") if shown else "rank 1"
        )
    if "Root Cause (first observed failure)" in output:
        block = output.split("Root Cause (first observed failure)", 1)[1]
        names = re.search(r"rank\s*:\s*1 ", block) is not None
        message = "injected fault on rank 1" in block
        return ("rank 1" if names else "another rank") + (
            " and its exception" if message else ", no traceback (error_file: <N/A>)"
        )
    return "none"


def run_once(launcher: str, fault: str, tmp: Path) -> Result:
    tag = uuid.uuid4().hex
    command = [*LAUNCHERS[launcher], str(SCRIPT), "--fault", fault, "--tag", tag]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "DDPKIT_"))}
    env.update(OMP_NUM_THREADS="1", TMPDIR=str(tmp), PYTHONUNBUFFERED="1")
    log = tmp / f"{tag}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    start = None
    deadline = time.monotonic() + 120
    while start is None and time.monotonic() < deadline and proc.poll() is None:
        text = log.read_text(errors="replace")
        if fault == "none" and text.count("raw: rank ") >= 2:
            time.sleep(0.5)
            start = time.time()
            os.kill(proc.pid, signal.SIGKILL)
        elif (found := _FAULT_AT.search(text)) is not None:
            start = float(found.group(1))
        time.sleep(0.01)
    ended = None
    while time.time() - (start or time.time()) < CAP:
        if not _tagged(tag) and proc.poll() is not None:
            ended = time.time()
            break
        time.sleep(0.02)
    code = proc.poll()
    if code is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(3.0 if ended is None or fault == "none" else 0)
    left = [p for p in _tagged(tag) if p != proc.pid]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    exit_ = "still running at the cap" if code is None else f"exit {code}"
    if fault == "none":
        exit_ = "killed by SIGKILL"
    seconds = None if ended is None or start is None else max(0.0, ended - start)
    return Result(seconds, exit_, _root_cause(log.read_text(errors="replace"), fault), len(left))


def _row(case: str, launcher: str, results: list[Result]) -> str:
    done = [r.seconds for r in results if r.seconds is not None]
    if len(done) == len(results):
        times = f"{min(done):.2f} / {statistics.median(done):.2f} / {max(done):.2f}"
    else:
        times = f"> {CAP:g} (ended by the bench in {len(results) - len(done)} of {len(results)})"
    left = max(r.left for r in results)
    left_text = "nothing" if left == 0 else f"{left} process(es) of the run"
    exits = ", ".join(sorted({r.exit for r in results}))
    causes = ", ".join(sorted({r.root_cause for r in results}))
    return f"| {case} | {launcher} | {times} | {exits} | {causes} | {left_text} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-doc", action="store_true", help="print the table only")
    args = parser.parse_args()
    rows = [
        "| fault | launcher | time to end, s (min / median / max) | exit | root cause shown "
        "| left running 3 s after |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    with tempfile.TemporaryDirectory(prefix="bench-run-") as folder:
        for case, fault in CASES.items():
            for launcher in LAUNCHERS:
                runs = 1 if (fault == "stall" and launcher == "torchrun") else args.runs
                results = [run_once(launcher, fault, Path(folder)) for _ in range(runs)]
                rows.append(_row(case, launcher, results))
                print(rows[-1], flush=True)
    import torch

    rows.append("")
    rows.append(
        f"Measured on {os.cpu_count()} cores, Python {sys.version.split()[0]}, torch "
        f"{torch.__version__}, 2 CPU ranks with gloo; ddpkit run's stall timeout "
        f"{STALL_TIMEOUT:g} s (in its rows' times), the bench's cap {CAP:g} s."
    )
    table = "\n".join(rows)
    if args.no_doc:
        return
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    DOC.write_text(f"{head}{START}\n{table}\n{END}{rest.split(END, 1)[1]}")


if __name__ == "__main__":
    main()
