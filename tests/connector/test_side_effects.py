"""Constructing a Trainer starts no process, opens no port and does not initialize CUDA."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch

from ddpkit import DDPPlugin, DDPSpawnPlugin, Trainer

Machine = Callable[..., None]


def _children() -> set[int]:
    me = os.getpid()
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            out.add(int(stat.parent.name))
    return out


def _sockets() -> set[str]:
    out = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:"):
            out.add(target)
    return out


def test_construction_has_no_side_effects(machine: Machine) -> None:
    machine(gpus=2)
    before_children, before_sockets = _children(), _sockets()
    trainers = [
        Trainer(accelerator="cpu", devices=2, plugins=[DDPPlugin()]),
        Trainer(accelerator="cpu", devices=2, strategy=DDPSpawnPlugin()),
        Trainer(accelerator="gpu", devices=2, strategy="ddp", precision="16-mixed"),
        Trainer(accelerator="gpu", devices=[1]),
    ]
    assert len(trainers) == 4
    assert _children() == before_children
    assert _sockets() == before_sockets
    assert not torch.cuda.is_initialized()
    assert "MASTER_PORT" not in os.environ and "LOCAL_RANK" not in os.environ
