"""LocalEnvironment: ddpkit starts the ranks of this node; several nodes meet at MASTER_ADDR."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit import Trainer
from ddpkit._runtime.launch._env import require_rendezvous
from ddpkit.connector import AcceleratorConnector, Flags, resolve
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments import LocalEnvironment
from ddpkit.testing import make_probe

NODE1 = {"MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29500", "NODE_RANK": "1"}


def test_node_of_several_names_the_variables_in_the_plan() -> None:
    plan = resolve(Flags.of(accelerator="cpu", devices=2, num_nodes=2), make_probe(env=NODE1))
    assert (plan.environment.value, plan.launcher.value) == ("local", "subprocess")
    assert "MASTER_ADDR=10.1.2.3, MASTER_PORT=29500, NODE_RANK=1" in plan.environment.reason


def test_ranks_of_node_one() -> None:
    env = LocalEnvironment(NODE1)
    assert (env.node_rank(), env.local_rank()) == (1, 0)
    assert (env.main_address(), env.main_port(), env.requested_port()) == ("10.1.2.3", 29500, 29500)
    assert not env.creates_processes_externally
    flags = Flags.of(accelerator="cpu", devices=2, num_nodes=2)
    plugin = AcceleratorConnector(flags, make_probe(env=NODE1)).built.training_type
    assert (plugin.node_rank, plugin.global_rank, plugin.world_size) == (1, 2, 4)
    child_env = {**NODE1, "LOCAL_RANK": "1", "WORLD_SIZE": "4"}
    child = AcceleratorConnector(flags, make_probe(env=child_env)).built.training_type
    assert (child.global_rank, child.local_rank, child.world_size) == (3, 1, 4)
    assert child.cluster_environment is not None
    assert child.cluster_environment.creates_processes_externally  # it never launches


@pytest.mark.parametrize(("node_rank", "num_nodes"), [("2", 2), ("1", 1), ("-1", 2)])
def test_node_rank_out_of_range(node_rank: str, num_nodes: int) -> None:
    env = {**NODE1, "NODE_RANK": node_rank}
    flags = Flags.of(accelerator="cpu", devices=2, num_nodes=num_nodes)
    with pytest.raises(MisconfigurationError) as err:
        resolve(flags, make_probe(env=env))
    message = str(err.value)
    assert message.startswith(f"{flags.call()}: NODE_RANK={node_rank}, but num_nodes={num_nodes}")
    assert f"has node ranks 0..{num_nodes - 1}" in message


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({}, "MASTER_ADDR, MASTER_PORT, NODE_RANK are not set"),
        ({"MASTER_ADDR": "10.1.2.3", "NODE_RANK": "0"}, "MASTER_PORT is not set"),
    ],
)
def test_several_nodes_without_a_rendezvous_fail_before_launching(
    env: dict[str, str], missing: str
) -> None:
    with pytest.raises(MisconfigurationError) as err:
        require_rendezvous(LocalEnvironment(env), 2, 2)  # what every launcher checks first
    message = str(err.value)
    assert message.startswith("Trainer(devices=2, num_nodes=2) without torchrun or SLURM")
    assert "all 2 × 2 = 4 meet at MASTER_ADDR:MASTER_PORT" in message
    assert missing in message
    assert "NODE_RANK=<0..1>" in message
    # Reading the ranks never raises: node 0 until NODE_RANK says otherwise.
    assert LocalEnvironment(env).node_rank() == int(env.get("NODE_RANK", 0))


def test_one_node_needs_no_rendezvous() -> None:
    local = LocalEnvironment({})
    require_rendezvous(local, 2, 1)
    assert (local.requested_port(), local.node_rank()) == (None, 0)


class _Tiny(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_launcher")
def test_fit_on_two_nodes_without_variables_raises_and_starts_nothing(tmp_path: Path) -> None:
    trainer = Trainer(
        accelerator="cpu", devices=2, num_nodes=2, max_steps=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, default_root_dir=str(tmp_path),
    )  # fmt: skip
    loader = DataLoader(TensorDataset(torch.ones(4, 2)), batch_size=2)
    children_before = _children()
    with pytest.raises(MisconfigurationError, match=r"MASTER_ADDR, MASTER_PORT, NODE_RANK"):
        trainer.fit(_Tiny(), loader)
    assert _children() == children_before


def _children() -> set[int]:
    """Processes whose parent is this one."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == os.getpid():
                found.add(int(entry))
    return found
