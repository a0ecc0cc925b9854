"""Raw PyTorch, the floor: the loop a user writes by hand.

    python -m bench.run_raw --workload mlp --mode single
    python -m bench.run_raw --workload mlp --mode ddp     # 2 ranks, hand-written launcher
    python -m bench.run_raw --workload mlp --mode spawn   # 2 ranks, torch.multiprocessing

The DDP launcher is the minimal one: rank 0 picks a port and re-runs its own command line with the
rank variables, right after ``import torch`` (like ddpkit's ``DDPPlugin`` and Lightning's
``strategy="ddp"``, which re-run the script too).
"""

from __future__ import annotations

import time

_t = time.perf_counter()

import os  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

from bench.workload import (  # noqa: E402
    SEED,
    TimedSGD,
    Workload,
    make_loader,
    make_net,
    parse_args,
    write_result,
)

IMPORT_S = time.perf_counter() - _t
WORLD_SIZE = 2


class Net(nn.Module):
    def __init__(self, w: Workload) -> None:
        super().__init__()
        self.net = make_net(w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # type: ignore[no-any-return]


def train(w: Workload, mode: str, rank: int, world_size: int, device: str = "cpu") -> None:
    if world_size > 1:
        # What Lightning and ddpkit do on CPU: ranks × threads ≤ cores.
        if "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(SEED)
    model: nn.Module = Net(w).to(device)
    loader = make_loader(w, world_size, w.steps)
    if world_size > 1:
        model = nn.parallel.DistributedDataParallel(model)
        # What Lightning and ddpkit put in: shuffled with seed 0, epoch 0.
        sampler = DistributedSampler(loader.dataset, num_replicas=world_size, rank=rank, seed=0)
        loader = DataLoader(loader.dataset, batch_size=w.batch, sampler=sampler)
    opt = TimedSGD(model.parameters())
    last = torch.zeros(())
    for x, y in loader:
        if device != "cpu":
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        last = loss.detach()
    if rank == 0:
        write_result(
            contender="raw",
            w=w,
            mode=mode,
            features="off",
            world_size=world_size,
            steps=w.steps,
            optimizer=opt,
            final_loss=float(last),
            import_s=IMPORT_S,
        )
    if world_size > 1:
        # Every rank done before the group goes (else gloo can abort a rank still in its last
        # all-reduce as the other tears down: "terminate called without an active exception").
        dist.barrier()
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawned(rank: int, w: Workload, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    train(w, "spawn", rank, WORLD_SIZE)


def main() -> None:
    args = parse_args()
    w: Workload = args.w
    if args.mode == "single":
        train(w, "single", 0, 1, args.device)
    elif args.mode == "spawn":
        import torch.multiprocessing as mp

        mp.spawn(_spawned, args=(w, _free_port()), nprocs=WORLD_SIZE)
    elif "LOCAL_RANK" in os.environ:  # a child of the launcher below
        train(w, "ddp", int(os.environ["LOCAL_RANK"]), WORLD_SIZE)
    else:
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
        command = [sys.executable, *sys.orig_argv[1:]]  # this very command line, again
        children: list[subprocess.Popen[Any]] = [
            subprocess.Popen(command, env=dict(env, LOCAL_RANK=str(r)))
            for r in range(1, WORLD_SIZE)
        ]
        os.environ.update(env)
        train(w, "ddp", 0, WORLD_SIZE)
        codes = [c.wait() for c in children]
        if any(codes):
            sys.exit(f"raw ddp: a child failed: exit codes {codes}")


if __name__ == "__main__":
    main()
