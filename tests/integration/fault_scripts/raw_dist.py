"""A raw ``torch.distributed`` script (no ddpkit in it) with one injected fault, for
``ddpkit run`` and torchrun alike (tests, bench/run_vs_torchrun.py).

    python raw_dist.py --fault raise|kill|stall|flaky|none|ok [--rank R] [--steps N] [--tag T]

Every rank prints ``raw: rank R pid P`` once the process group is up; the faulting rank prints
``raw: fault <name> rank R at <time.time()>`` just before the fault (step 3). ``flaky`` raises on
the first attempt only (``TORCHELASTIC_RESTART_COUNT`` 0). ``--tag`` only marks the command line,
so a harness can find every process of the run. At its very end (its first atexit handler) each
rank prints ``raw: rank R threads at exit: NAMES``, the threads still alive besides the main one.
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist


def say(text: str) -> None:
    print(f"raw: {text}", file=sys.stderr, flush=True)


def threads_at_exit(rank: int) -> None:
    names = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
    say(f"rank {rank} threads at exit: {' '.join(names) or '-'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", default="ok")
    parser.add_argument("--rank", type=int, default=1)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    atexit.register(threads_at_exit, rank)  # the first registered: it runs last
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
    say(f"rank {rank} pid {os.getpid()} attempt {attempt}")
    steps = 10**6 if args.fault == "none" else args.steps
    for step in range(steps):
        if step == 3 and rank == args.rank and args.fault not in ("none", "ok"):
            say(f"fault {args.fault} rank {rank} at {time.time():.6f}")
            if args.fault == "raise" or (args.fault == "flaky" and attempt == "0"):
                raise RuntimeError(f"injected fault on rank {rank}")
            if args.fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            while args.fault == "stall":  # never reaches the next all_reduce
                time.sleep(0.1)
        total = torch.ones(1)
        dist.all_reduce(total)
        time.sleep(0.05)
    say(f"rank {rank} done attempt {attempt} sum {total.item():g}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
