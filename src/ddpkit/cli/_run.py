"""``ddpkit run``: N ranks of any script, with torchrun's flags and environment, under ddpkit's
supervision (:mod:`ddpkit._runtime.launch._run_job` says exactly what each rank gets)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ddpkit.cli._parser import Command, UsageError

_DESCRIPTION = (
    "Start --nproc-per-node ranks of a script with torchrun's environment (RANK, LOCAL_RANK, "
    "WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, "
    "TORCHELASTIC_RESTART_COUNT, ...). The first rank that fails ends the job, with its traceback "
    "first; the ranks die with ddpkit run; a stalled collective dumps every rank's stacks."
)
_EXAMPLES = """\
examples:
  ddpkit run --nproc-per-node 2 train.py --lr 0.1
  ddpkit run --nproc-per-node 2 -m mypackage.train
  ddpkit run --nproc-per-node 2 --max-restarts 3 train.py
  ddpkit run --nnodes 2 --node-rank 0 --master-addr node0 --master-port 29500 \\
      --nproc-per-node 2 train.py          # and --node-rank 1 on node1"""


def _register(sub: Any) -> argparse.ArgumentParser:
    run: argparse.ArgumentParser = sub.add_parser(
        "run",
        help="start N ranks of any script (torchrun's flags), supervised by ddpkit",
        description=_DESCRIPTION,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "--nproc-per-node",
        "--nproc_per_node",
        type=int,
        default=1,
        metavar="N",
        help="ranks on this node (default 1)",
    )
    run.add_argument(
        "--nnodes", type=int, default=1, metavar="M", help="nodes in the job (default 1)"
    )
    run.add_argument(
        "--node-rank", "--node_rank", type=int, default=0, metavar="R",
        help="this node's rank, 0..nnodes-1 (default 0)",
    )  # fmt: skip
    run.add_argument(
        "--master-addr",
        "--master_addr",
        metavar="ADDR",
        help="node 0's address (required with several nodes; default 127.0.0.1)",
    )
    run.add_argument(
        "--master-port",
        "--master_port",
        metavar="PORT",
        type=int,
        help="node 0's store port (required with several nodes; default: a free one)",
    )
    run.add_argument(
        "--max-restarts",
        "--max_restarts",
        default=0,
        metavar="K",
        type=int,
        help="restart the whole job up to K times after a failure (default 0)",
    )
    run.add_argument(
        "--stall-timeout",
        default=1800.0,
        metavar="SECONDS",
        type=float,
        help="a collective waiting this long is a stall: every rank's stacks, the "
        "rank that never arrived named (default 1800, gloo's own timeout; 0: off)",
    )
    run.add_argument(
        "-m", "--module", action="store_true", help="run TARGET as a module (python -m TARGET)"
    )
    run.add_argument("target", metavar="TARGET", help="the script (or module with -m)")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return run  # fmt: skip


def _check(args: argparse.Namespace) -> None:
    prog = "ddpkit run"
    if not args.module and not os.path.isfile(args.target):
        raise UsageError(
            f"{args.target!r} is not a file (the script to run; with -m, a module name)", prog
        )
    for name in ("nproc_per_node", "nnodes"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag}={getattr(args, name)}: at least 1 is needed", prog)
    if not 0 <= args.node_rank < args.nnodes:
        raise UsageError(
            f"--node-rank={args.node_rank} with --nnodes={args.nnodes}: the node rank is one of "
            f"0..{args.nnodes - 1}",
            prog,
        )
    if args.max_restarts < 0:
        raise UsageError(f"--max-restarts={args.max_restarts}: 0 or more", prog)
    if args.nnodes > 1 and (args.master_addr is None or args.master_port is None):
        raise UsageError(
            f"--nnodes={args.nnodes} needs --master-addr and --master-port (node 0's address and "
            f"a port free there), the same on every node",
            prog,
        )
    if args.nnodes > 1 and args.max_restarts > 0:
        raise UsageError(
            f"--max-restarts={args.max_restarts} with --nnodes={args.nnodes}: a restart starts "
            f"the ranks of this node only, and the other nodes would not meet them on a fresh "
            f"store; restart several nodes with torchrun's c10d rendezvous or the scheduler "
            f"(srun --requeue), or use one node",
            prog,
        )


def _run(args: argparse.Namespace) -> int:
    _check(args)
    from ddpkit._runtime.launch._run_job import RunSpec, interrupted_status, run

    spec = RunSpec(
        target=args.target,
        args=tuple(args.args),
        module=args.module,
        nproc_per_node=args.nproc_per_node,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        max_restarts=args.max_restarts,
        stall_timeout=args.stall_timeout,
    )
    try:
        return run(spec)
    except (KeyboardInterrupt, SystemExit) as exc:
        return interrupted_status(exc)


COMMAND = Command("run", (), _register, _run)
