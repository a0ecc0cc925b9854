"""LSF's job step manager (``jsrun``) started every rank.

Detected as in Lightning 2.x: ``LSB_JOBID``, ``LSB_DJOB_RANKFILE``,
``JSM_NAMESPACE_LOCAL_RANK`` and ``JSM_NAMESPACE_SIZE`` set. The ranks come from jsrun's
``JSM_NAMESPACE_RANK`` / ``JSM_NAMESPACE_LOCAL_RANK`` / ``JSM_NAMESPACE_SIZE``. The hosts come
from the job's rank file (``LSB_DJOB_RANKFILE``, one host per line, Open MPI's format): its
first line is the launch node, which runs no rank, so it is dropped; the node rank is the
position of this host among the others (first appearance), the main address is the first of
them, and the port is ``MASTER_PORT``, else ``10000 + LSB_JOBID % 1000`` — the same in every
rank without talking to the others. All as Lightning's ``LSFEnvironment`` reads them; ddpkit
reads the file when asked (not when the environment is built) and leaves ``os.environ`` alone.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments._base import ExternalEnvironment

_REQUIRED = ("LSB_JOBID", "LSB_DJOB_RANKFILE", "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_SIZE")


class LSFEnvironment(ExternalEnvironment):
    """``jsrun`` started every rank; see the module docstring. ``hostname`` is this machine's
    name as the rank file spells it (None: ``socket.gethostname()``)."""

    name: ClassVar[str] = "lsf"
    detection_variables: ClassVar[tuple[str, ...]] = (*_REQUIRED, "JSM_NAMESPACE_RANK")

    def __init__(self, env: Mapping[str, str] | None = None, *, hostname: str | None = None):
        super().__init__(env)
        self._hostname = hostname
        self._hosts: list[str] | None = None

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> bool:
        return all(k in env for k in _REQUIRED)

    def hosts(self) -> list[str]:
        """The compute hosts of the job, one line per rank slot, the launch node left out."""
        if self._hosts is None:
            path = self.env.get("LSB_DJOB_RANKFILE", "")
            if not path:
                raise MisconfigurationError(
                    "LSFEnvironment: LSB_DJOB_RANKFILE is not set or empty, so the job's hosts "
                    "are unknown. Fix: start the ranks with jsrun inside an LSF job (bsub)."
                )
            try:
                lines = Path(path).read_text().splitlines()
            except OSError as err:
                why = err.strerror or str(err)
                raise MisconfigurationError(
                    f"LSFEnvironment: cannot read LSB_DJOB_RANKFILE={path!r} ({why}). Fix: "
                    f"start the ranks with jsrun inside the LSF job that wrote it."
                ) from err
            self._hosts = [line.strip() for line in lines if line.strip()][1:]
        return self._hosts

    def _unique_hosts(self) -> list[str]:
        return list(dict.fromkeys(self.hosts()))

    def main_address(self) -> str:
        hosts = self.hosts()
        if not hosts:
            raise MisconfigurationError(
                f"LSFEnvironment: LSB_DJOB_RANKFILE={self.env.get('LSB_DJOB_RANKFILE')!r} lists "
                f"no compute host after the launch node. Fix: start the ranks with jsrun."
            )
        return hosts[0]

    def main_port(self) -> int:
        if "MASTER_PORT" in self.env:
            return self._int("MASTER_PORT")
        return 10000 + self._int("LSB_JOBID") % 1000

    def world_size(self) -> int:
        return self._int("JSM_NAMESPACE_SIZE")

    def global_rank(self) -> int:
        return self._int("JSM_NAMESPACE_RANK")

    def local_rank(self) -> int:
        return self._int("JSM_NAMESPACE_LOCAL_RANK")

    def node_rank(self) -> int:
        hosts = self._unique_hosts()
        name = self._hostname or socket.gethostname()
        for candidate in (name, name.split(".", 1)[0]):
            if candidate in hosts:
                return hosts.index(candidate)
        raise MisconfigurationError(
            f"LSFEnvironment: this host {name!r} is not among the job's hosts "
            f"{', '.join(hosts) or '(none)'} (LSB_DJOB_RANKFILE="
            f"{self.env.get('LSB_DJOB_RANKFILE')!r}). Fix: start the ranks with jsrun inside "
            f"the LSF job that wrote the file."
        )

    def validate(self, devices: int, num_nodes: int, call: str) -> None:
        if "JSM_NAMESPACE_RANK" not in self.env:
            raise MisconfigurationError(
                f"{call}: LSF's jsrun starts every rank with JSM_NAMESPACE_RANK, which is not set "
                f"here. Fix: start the script with `jsrun ... python script.py`."
            )
        self._check_integers(
            call, (*_REQUIRED[2:], "JSM_NAMESPACE_RANK", "LSB_JOBID", "MASTER_PORT")
        )
        size, nodes = self.world_size(), len(self._unique_hosts())
        fix = f"Fix: pass devices={size // max(1, nodes)}, num_nodes={nodes}"
        if devices * num_nodes != size:
            raise MisconfigurationError(
                f"{call}: devices({devices}) × num_nodes({num_nodes}) = {devices * num_nodes}, "
                f"but jsrun started JSM_NAMESPACE_SIZE={size} ranks on {nodes} host(s) of "
                f"LSB_DJOB_RANKFILE. {fix} (or start jsrun with {devices} per host)."
            )
        if num_nodes != nodes:
            raise MisconfigurationError(
                f"{call}: num_nodes={num_nodes}, but the job's rank file "
                f"(LSB_DJOB_RANKFILE) lists {nodes} compute host(s): "
                f"{', '.join(self._unique_hosts())}. {fix}."
            )
        self.node_rank()  # this host must be one of them

    def __repr__(self) -> str:
        return "LSFEnvironment()"
