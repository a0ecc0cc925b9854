"""A real Jupyter kernel for the notebook tests: nbclient runs a notebook's cells in order, and
jupyter_client (nbclient's own) drives a kernel cell by cell where a test interrupts or shuts it
down mid-cell."""

from __future__ import annotations

import json
import os
import queue
import time
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

#: a line a cell prints to hand a result to the test (json after it)
RESULT = "RESULT "


def run_notebook(cells: list[str], cwd: Path, timeout: int = 240) -> list[list[dict[str, Any]]]:
    """Run ``cells`` as one notebook in a new kernel (an error does not stop the run: the test
    reads it); each cell's outputs."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    client = NotebookClient(
        nb, kernel_name="python3", timeout=timeout, allow_errors=True, resources={}
    )
    client.execute(cwd=str(cwd), env=kernel_env())
    return [list(cell.outputs) for cell in nb.cells]


def kernel_env() -> dict[str, str]:
    """The test process's environment without pytest's own variables: a user's kernel."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DDPKIT_"))}


def results(outputs: list[dict[str, Any]]) -> list[Any]:
    """What a cell handed over with ``print(RESULT + json.dumps(...))``."""
    text = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    return [
        json.loads(line[len(RESULT) :]) for line in text.splitlines() if line.startswith(RESULT)
    ]


def error(outputs: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((o for o in outputs if o["output_type"] == "error"), None)


def stream(outputs: list[dict[str, Any]], name: str) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("name") == name)


class Kernel:
    """One kernel, driven cell by cell: :meth:`start` sends a cell, :meth:`reply` waits for it."""

    def __init__(self, cwd: Path) -> None:
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(cwd=str(cwd), env=kernel_env())
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def start(self, code: str) -> str:
        return str(self.client.execute(code))

    def reply(self, msg_id: str, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            reply = self.client.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                return dict(reply["content"])

    def run(self, code: str, timeout: float = 120) -> dict[str, Any]:
        content = self.reply(self.start(code), timeout)
        for _ in range(3):
            # Right after a cell's error (an interrupt's KeyboardInterrupt), ipykernel aborts the
            # requests it receives until its queue is cleared (stop_on_error): a cell sent then
            # is answered "aborted", unrun, as in a notebook; it is sent again.
            if content["status"] != "aborted":
                break
            time.sleep(0.5)
            content = self.reply(self.start(code), timeout)
        if content["status"] != "ok":
            raise AssertionError(f"cell failed: {content.get('ename')}: {content.get('evalue')}")
        return content

    def drain(self) -> None:
        while True:
            try:
                self.client.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                return

    def pid(self) -> int:
        provisioner: Any = self.manager.provisioner
        return int(provisioner.process.pid)

    def shutdown(self, now: bool = False) -> None:
        self.client.stop_channels()
        if self.manager.is_alive():
            self.manager.shutdown_kernel(now=now)


def wait_for_files(folder: Path, count: int, timeout: float = 90) -> list[int]:
    """The pids the ranks wrote into ``folder`` once ``count`` of them did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(folder.glob("*.pid"))
        if len(found) >= count:
            return [int(p.read_text()) for p in found]
        time.sleep(0.2)
    raise AssertionError(
        f"{count} ranks did not start within {timeout} s: {list(folder.iterdir())}"
    )


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie that its parent did not reap yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False
