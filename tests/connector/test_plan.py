"""The plan: pure resolution, a reason for every field, explain() and the modern call."""

from __future__ import annotations

import json

import pytest

from ddpkit import DDPPlugin
from ddpkit.connector import Flags, resolve
from ddpkit.connector._devices import DeviceRequest, parse_device_spelling
from ddpkit.errors import MisconfigurationError
from ddpkit.testing import make_probe


def test_resolve_is_pure() -> None:
    flags = Flags.of(accelerator="ddp_cpu", num_processes=2)
    probe = make_probe()
    assert resolve(flags, probe) == resolve(flags, probe)


def test_every_field_has_a_reason() -> None:
    plan = resolve(Flags.of(accelerator="ddp_cpu", num_processes=2), make_probe())
    for field, value, reason in plan.rows():
        assert value, field
        assert reason, field


def test_explain_aligns_fields_and_names_the_deciding_flag() -> None:
    plan = resolve(
        Flags.of(
            accelerator="ddp_cpu", num_processes=2, plugins=["ddp_find_unused_parameters_false"]
        ),
        make_probe(),
    )
    text = plan.explain(width=1000)  # one line per field, however long
    lines = text.splitlines()
    assert lines[0] == (
        "plan for Trainer(accelerator='ddp_cpu', num_processes=2, "
        "plugins=['ddp_find_unused_parameters_false'])"
    )
    fields = [line.split()[0] for line in lines[1:11]]
    assert fields == [
        "accelerator", "devices", "num_nodes", "world_size", "training_type", "backend",
        "launcher", "environment", "precision", "sync_batchnorm",
    ]  # fmt: skip
    # values start in one column
    assert len({line.index(line.split()[1], 2 + len(line.split()[0])) for line in lines[1:11]}) == 1
    assert "accelerator='ddp_cpu'" in lines[1]
    assert "num_processes=2" in lines[2]
    assert "plugins=['ddp_find_unused_parameters_false']" in lines[5]
    assert lines[-1].split(None, 2)[2] == (
        "Trainer(accelerator='cpu', devices=2, strategy='ddp_find_unused_parameters_false')"
    )


def test_json_form() -> None:
    plan = resolve(Flags.of(accelerator="cpu", devices=2), make_probe())
    data = json.loads(plan.to_json())
    assert data["training_type"]["value"] == "ddp(find_unused_parameters=False)"
    assert data["backend"]["value"] == "gloo"
    assert data["launcher"]["value"] == "subprocess"
    assert data["world_size"]["value"] == "2"
    assert data["devices"]["indices"] == [0, 1]
    assert data["modern_call"] == "Trainer(accelerator='cpu', devices=2, strategy='ddp')"


def test_modern_call_keeps_the_users_instance() -> None:
    plan = resolve(
        Flags.of(
            accelerator="ddp_cpu", num_processes=2, plugins=[DDPPlugin(find_unused_parameters=True)]
        ),
        make_probe(),
    )
    assert plan.modern_call == (
        "Trainer(accelerator='cpu', devices=2, strategy=DDPPlugin(find_unused_parameters=True))"
    )


def test_environment_reason_names_the_variables() -> None:
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "GROUP_RANK": "0",
           "LOCAL_WORLD_SIZE": "2", "MASTER_PORT": "1"}  # fmt: skip
    plan = resolve(Flags.of(accelerator="cpu", devices=2), make_probe(env=env))
    assert plan.environment.value == "torchelastic"
    assert "WORLD_SIZE=2" in plan.environment.reason and "GROUP_RANK=0" in plan.environment.reason
    assert plan.launcher.value == "external"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2, DeviceRequest("count", count=2)),
        ("2", DeviceRequest("count", count=2)),
        (-1, DeviceRequest("all")),
        ("-1", DeviceRequest("all")),
        ("auto", DeviceRequest("auto")),
        ([1], DeviceRequest("ids", count=1, ids=(1,))),
        ((0, 1), DeviceRequest("ids", count=2, ids=(0, 1))),
        ("0,1", DeviceRequest("ids", count=2, ids=(0, 1))),
        ("1,", DeviceRequest("ids", count=1, ids=(1,))),
        (0, DeviceRequest("count", count=0)),
        ([], DeviceRequest("count", count=0)),
    ],
)
def test_device_spellings(value: object, expected: DeviceRequest) -> None:
    parsed = parse_device_spelling("Trainer()", "gpus", value)
    assert parsed is not None and parsed.same_as(expected)


@pytest.mark.parametrize(
    ("value", "pattern"),
    [([0, 0], "appears twice"), ([-1], "integers ≥ 0"), (True, "is a bool"),
     (1.5, "expected an int")],
)  # fmt: skip
def test_bad_device_spellings(value: object, pattern: str) -> None:
    with pytest.raises(MisconfigurationError, match=pattern):
        parse_device_spelling("Trainer()", "devices", value)


@pytest.mark.parametrize(
    ("precision", "name"),
    [(32, "32-true"), ("32", "32-true"), (64, "64-true"), ("64-true", "64-true"),
     ("bf16", "bf16-mixed"), ("bf16-mixed", "bf16-mixed")],
)  # fmt: skip
def test_precision_spellings_on_cpu(precision: object, name: str) -> None:
    plan = resolve(Flags.of(precision=precision), make_probe())
    assert plan.precision.value == name


@pytest.mark.parametrize("precision", [16, "16", "16-mixed"])
def test_16_mixed_on_gpu(precision: object) -> None:
    plan = resolve(Flags.of(precision=precision, accelerator="gpu"), make_probe(gpus=1))
    assert plan.precision.value == "16-mixed"


def test_explain_wraps_long_lines_under_their_column() -> None:
    plan = resolve(Flags.of(accelerator="ddp_cpu", num_processes=2), make_probe())
    lines = plan.explain().splitlines()
    assert max(len(line) for line in lines) <= 100
    row = next(i for i, line in enumerate(lines) if line.startswith("  training_type"))
    column = lines[row].index("accelerator='ddp_cpu' with")
    assert lines[row + 1].startswith(" " * column + "num_processes=2")
    deprecated = next(i for i, line in enumerate(lines) if line.startswith("  deprecated:"))
    assert all(line.startswith(" " * 18 + line.lstrip()) for line in lines[deprecated + 1 :])
    unwrapped = plan.explain(width=1000).splitlines()
    assert " ".join(" ".join(lines).split()) == " ".join(" ".join(unwrapped).split())
