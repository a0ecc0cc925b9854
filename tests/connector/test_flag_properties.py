"""A property of the whole connector, over the Trainer's device flags, the plugins' constructor
arguments and the machine: every call gives a plan whose objects are what it says, or a
MisconfigurationError that quotes the call as written and ends with a fix. Never another
exception, never a plan that disagrees with the objects."""

from __future__ import annotations

import contextlib
import datetime
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from plan_checks import assert_plan_is_what_runs

from ddpkit import DDPPlugin, DDPSpawnPlugin, SingleDevicePlugin
from ddpkit.accelerators import CPUAccelerator, GPUAccelerator
from ddpkit.connector import AcceleratorConnector, Flags
from ddpkit.errors import MisconfigurationError
from ddpkit.plugins.environments import LocalEnvironment, SLURMEnvironment, TorchElasticEnvironment
from ddpkit.plugins.precision import DoublePrecisionPlugin, MixedPrecisionPlugin, PrecisionPlugin
from ddpkit.testing import make_probe

pytestmark = pytest.mark.timeout(300)

JUNK = st.sampled_from(["", "x", "²", "1.5", "-1", "auto", "0,1", "[0]", "2 ", "١", None])
NUMBERS = st.one_of(
    st.integers(-3, 4), st.integers(-(2**72), 2**72), st.floats(allow_nan=True), st.booleans()
)
DEVICE_VALUES = st.one_of(
    st.none(), NUMBERS, JUNK, st.lists(st.integers(-1, 3), max_size=3),
    st.tuples(st.integers(0, 2)), st.sampled_from([b"2", {0, 1}, {"a": 1}, object()]),
)  # fmt: skip
NAMES = st.sampled_from([
    None, "auto", "cpu", "gpu", "cuda", "ddp_cpu", "ddp", "ddp_spawn", "ddp_cpu_spawn",
    "single_device", "ddp_find_unused_parameters_false", "ddp_spawn_find_unused_parameters_true",
    "tpu", "dp", "dpp", "CPU", "fsdp", "", "ddp2",
])  # fmt: skip
TORCHRUN = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "GROUP_RANK": "0",
            "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}  # fmt: skip
SRUN = {"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2",
        "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_JOB_ID": "77",
        "SLURM_NNODES": "1", "SLURM_TASKS_PER_NODE": "2"}  # fmt: skip
NODE1 = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "NODE_RANK": "1"}
CHILD = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29501", "LOCAL_RANK": "1",
         "WORLD_SIZE": "2", "NODE_RANK": "0"}  # fmt: skip


@st.composite
def environments(draw: st.DrawFn) -> dict[str, str]:
    env = dict(draw(st.sampled_from([{}, TORCHRUN, SRUN, NODE1, CHILD, {"SLURM_NTASKS": "4"}])))
    for _ in range(draw(st.integers(0, 2))):  # spoil a variable now and then
        key = draw(
            st.sampled_from(sorted({*TORCHRUN, *SRUN, *NODE1, "PL_TORCH_DISTRIBUTED_BACKEND"}))
        )
        value = draw(
            st.one_of(JUNK.filter(lambda v: v is not None), st.sampled_from(["gloo", "nccl", "3"]))
        )
        env[key] = value  # type: ignore[assignment]
    return env


@st.composite
def training_types(draw: st.DrawFn) -> Any:
    """A plugin built from random arguments, or the MisconfigurationError building raised."""
    kind = draw(st.sampled_from([DDPPlugin, DDPSpawnPlugin, SingleDevicePlugin]))
    if kind is SingleDevicePlugin:
        args: dict[str, Any] = {
            "device": draw(st.sampled_from([None, "cpu", 0, "cuda:1", "potato", 1.5]))
        }
    else:
        args = {}
        if draw(st.booleans()):
            args["parallel_devices"] = draw(st.sampled_from([
                [torch.device("cpu")] * 2, [torch.device("cpu")] * 3, [torch.device("cuda", 0)],
                [], "cpu", [torch.device("cuda")],
            ]))  # fmt: skip
        if draw(st.booleans()):
            args["num_nodes"] = draw(st.one_of(st.integers(-1, 3), JUNK))
        if draw(st.booleans()):
            args["timeout"] = draw(
                st.one_of(NUMBERS, JUNK, st.just(datetime.timedelta(0)), st.just([5]))
            )
        if draw(st.booleans()):
            args["find_unused_parameters"] = draw(st.one_of(st.booleans(), JUNK))
        if draw(st.booleans()):
            args["process_group_backend"] = draw(st.sampled_from(["gloo", "nccl", "glo", 3]))
        if draw(st.booleans()):
            args["cluster_environment"] = draw(st.sampled_from([
                LocalEnvironment({}), TorchElasticEnvironment(TORCHRUN), TorchElasticEnvironment({}),
                SLURMEnvironment({}), "local",
            ]))  # fmt: skip
        if kind is DDPSpawnPlugin and draw(st.booleans()):
            args["start_method"] = draw(st.sampled_from(["spawn", "forkserver", "fork", "junk"]))
        if draw(st.booleans()):
            args[draw(st.sampled_from(["bucket_cap_mb", "bucket_cap_mbb", "device_ids"]))] = 25
    try:
        return kind(**args)
    except MisconfigurationError as err:
        assert_good_message(str(err), f"{kind.__name__}(")
        return None


def assert_good_message(message: str, call: str) -> None:
    assert message.startswith(call), (call, message)
    assert any(marker in message for marker in ("Fix:", "Choose one of", "takes ")), message


@st.composite
def flags(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["accelerator"] = draw(
            st.one_of(NAMES, st.sampled_from([CPUAccelerator(), GPUAccelerator(), 3]))
        )
    for name in ("devices", "gpus", "num_processes", "num_nodes"):
        if draw(st.booleans()):
            out[name] = draw(DEVICE_VALUES)
    if draw(st.booleans()):
        out["strategy"] = draw(st.one_of(NAMES, training_types()))
    if draw(st.booleans()):
        out["plugins"] = draw(st.lists(st.one_of(
            NAMES.filter(lambda n: n is not None), training_types(),
            st.sampled_from([LocalEnvironment({}), PrecisionPlugin(), DoublePrecisionPlugin(),
                             MixedPrecisionPlugin("bf16-mixed"), object()]),
        ), max_size=2))  # fmt: skip
    if draw(st.booleans()):
        out["precision"] = draw(
            st.sampled_from([32, 64, 16, "bf16", "16-mixed", 32.0, "8", True, None])
        )
    if draw(st.booleans()):
        out["sync_batchnorm"] = draw(st.sampled_from([True, False, "yes", 1, None]))
    return out


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flags=flags(),
    gpus=st.integers(0, 2),
    env=environments(),
    interactive=st.booleans(),
)
def test_a_plan_that_runs_or_a_clear_error(
    flags: dict[str, Any], gpus: int, env: dict[str, str], interactive: bool
) -> None:
    made = Flags.of(**flags)
    probe = make_probe(gpus=gpus, env=env, interactive=interactive)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            connector = AcceleratorConnector(made, probe)
    except MisconfigurationError as err:
        event("refused")
        assert_good_message(str(err), f"{made.call()}: ")
        return
    event(f"planned {connector.plan.training_type.value} / {connector.plan.launcher.value}")
    assert_plan_is_what_runs(connector)
    assert connector.plan.explain(width=10**6).startswith(f"plan for {made.call()}")


@st.composite
def plausible_flags(draw: st.DrawFn) -> dict[str, Any]:
    """What users mostly write: most of these resolve, so the plans themselves get checked."""
    pick = draw
    out: dict[str, Any] = {
        "accelerator": pick(
            st.sampled_from([None, "cpu", "auto", "ddp_cpu", "ddp", "ddp_spawn", "gpu"])
        ),
        # mostly one device flag, as users write them
        pick(st.sampled_from(["devices", "devices", "gpus", "num_processes"])): pick(
            st.sampled_from([None, 1, 2, 3, "2", "auto", -1, [0], [0, 1]])
        ),
        "num_nodes": pick(st.sampled_from([None, None, 1, 2])),
        "precision": pick(st.sampled_from([None, 32, 64, "bf16"])),
        "sync_batchnorm": pick(st.sampled_from([None, True])),
    }
    plugin = pick(st.sampled_from([
        None, "ddp", "ddp_spawn", "ddp_find_unused_parameters_false", "single_device",
        DDPPlugin(), DDPSpawnPlugin(find_unused_parameters=False), DDPPlugin(num_nodes=2),
        DDPPlugin(parallel_devices=[torch.device("cpu")] * 2), DDPPlugin(static_graph=True),
    ]))  # fmt: skip
    if plugin is not None:
        out[pick(st.sampled_from(["strategy", "plugins"]))] = plugin
    return {k: v for k, v in out.items() if v is not None}


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flags=plausible_flags(),
    gpus=st.integers(0, 2),
    env=st.sampled_from(
        [{}, TORCHRUN, SRUN, NODE1, CHILD, {"PL_TORCH_DISTRIBUTED_BACKEND": "gloo"}]
    ),
)
def test_plausible_flags_plan_what_runs_also_when_an_instance_is_reused(
    flags: dict[str, Any], gpus: int, env: dict[str, str]
) -> None:
    probe = make_probe(gpus=gpus, env=env)
    connectors = []
    for _ in range(2):  # the same flags (and plugin objects) for a second Trainer
        made = Flags.of(**flags)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                connectors.append(AcceleratorConnector(made, probe))
        except MisconfigurationError as err:
            event("refused")
            assert_good_message(str(err), f"{made.call()}: ")
            return
    event(f"planned {connectors[0].plan.training_type.value} / {connectors[0].plan.launcher.value}")
    for connector in connectors:
        assert_plan_is_what_runs(connector)
    first, second = (c.built.training_type for c in connectors)
    assert first is not second  # never one object for two Trainers
    assert connectors[0].plan.world_size == connectors[1].plan.world_size


# -- callbacks, loggers and the loop keywords -------------------------------------------------


class _BadRepr:
    """A user object whose repr raises: a message about it names its type."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


ODD = st.sampled_from([None, 3, -1, 0, 2.5, "x", "", True, b"p", [1], {}, object(), _BadRepr()])
PATHS = st.sampled_from(["<tmp>", "<tmp>/sub", "<file>", "<file>/sub", "<tmp>/a/../b"])


def _path(value: Any, root: Path) -> Any:
    if isinstance(value, str) and value.startswith("<"):
        kind, _, rest = value[1:].partition(">")
        return str(root / ("a_file" if kind == "file" else "out")) + rest
    return value


@st.composite
def callback_and_logger_arguments(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    """Constructor arguments of ModelCheckpoint, EarlyStopping, LearningRateMonitor, the two
    loggers and the Trainer's loop keywords: plausible values and junk."""

    def some(**choices: st.SearchStrategy[Any]) -> dict[str, Any]:
        return {k: draw(v) for k, v in choices.items() if draw(st.integers(0, 2)) == 0}

    return {
        "ModelCheckpoint": some(
            dirpath=st.one_of(PATHS, ODD),
            filename=st.sampled_from(
                ["{epoch}", "{epoch", "{val_loss:.2f}", "{val_loss:03d}", "{}", "x/{step}", 3]
            ),
            monitor=st.sampled_from(["val_loss", "loss", None, 3]),
            save_top_k=st.one_of(st.integers(-2, 3), ODD),
            mode=st.sampled_from(["min", "max", "x"]),
            save_last=st.sampled_from([True, False, None, "link", "x"]),
            every_n_epochs=st.one_of(st.integers(-1, 2), ODD),
            every_n_train_steps=st.one_of(st.integers(-1, 2), ODD),
        ),
        "EarlyStopping": some(
            monitor=st.sampled_from(["val_loss", "loss", "", 3, None]),
            patience=st.one_of(st.integers(-1, 3), ODD),
            min_delta=st.one_of(st.floats(), ODD),
            stopping_threshold=st.one_of(st.floats(), ODD),
            divergence_threshold=st.one_of(st.floats(), ODD),
            mode=st.sampled_from(["min", "max", 1]),
            check_on_train_epoch_end=st.sampled_from([None, True, False, "x"]),
        ),
        "LearningRateMonitor": some(
            logging_interval=st.sampled_from([None, "step", "epoch", "x", 3]),
            log_momentum=st.booleans(),
        ),
        "CSVLogger": some(
            save_dir=st.one_of(PATHS, ODD),
            name=st.one_of(st.sampled_from(["n", ""]), ODD),
            version=st.one_of(st.integers(-1, 2), st.sampled_from(["v", ""]), ODD),
            prefix=st.one_of(st.just("p"), ODD),
            flush_logs_every_n_steps=st.one_of(st.integers(-1, 3), ODD),
        ),
        "Trainer": some(
            accumulate_grad_batches=st.one_of(st.integers(-1, 3), ODD, st.just({0: 1, 1: 2})),
            max_steps=st.one_of(st.integers(-2, 3), ODD),
            max_epochs=st.one_of(st.integers(-2, 2), ODD),
            val_check_interval=st.one_of(st.sampled_from([1, 2, 50, 0.5, 1.0]), ODD),
            log_every_n_steps=st.one_of(st.integers(-1, 2), ODD),
            profiler=ODD,
            limit_train_batches=st.one_of(st.sampled_from([0, 1, 0.5, 2.0]), ODD),
            num_sanity_val_steps=st.one_of(st.integers(-2, 2), ODD),
            default_root_dir=PATHS,
        ),
    }


class _Steps(torch.nn.Module):
    """A module with Lightning's hooks that counts its training steps."""

    def __init__(self) -> None:
        super().__init__()
        self.layer, self.steps = torch.nn.Linear(2, 1), 0

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.steps += 1
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        pass

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=callback_and_logger_arguments())
def test_callbacks_loggers_and_loop_keywords_run_or_are_refused_with_a_fix(
    arguments: dict[str, dict[str, Any]],
) -> None:
    """Every value is honoured or refused with a MisconfigurationError that names the call and
    a fix — when the object is built, or (what only the file system knows) when fit starts,
    before the first step; never another exception (issue 22, item 3)."""
    from torch.utils.data import DataLoader, TensorDataset

    import ddpkit
    from ddpkit.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
    from ddpkit.loggers import CSVLogger

    kinds = {
        "ModelCheckpoint": ModelCheckpoint,
        "EarlyStopping": EarlyStopping,
        "LearningRateMonitor": LearningRateMonitor,
        "CSVLogger": CSVLogger,
    }
    # A relative path drawn from ODD ("x", "") is relative to the working directory: run in the
    # scratch folder, so that what such a run writes goes with it, never into the checkout.
    with (
        tempfile.TemporaryDirectory() as folder,
        contextlib.chdir(folder),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        root = Path(folder)
        (root / "a_file").write_text("")
        built: dict[str, Any] = {}
        for name, kind in kinds.items():
            given = {k: _path(v, root) for k, v in arguments[name].items()}
            if name == "EarlyStopping":
                given.setdefault("monitor", "val_loss")
            if name == "CSVLogger":
                given.setdefault("save_dir", str(root / "logs"))
            try:
                built[name] = kind(**given)
            except MisconfigurationError as err:
                assert_good_message(str(err), f"{name}(")
                event(f"{name} refused")
                return
        loop = {k: _path(v, root) for k, v in arguments["Trainer"].items()}
        loop.setdefault("default_root_dir", str(root / "root"))
        try:
            trainer = ddpkit.Trainer(
                callbacks=[
                    built["ModelCheckpoint"],
                    built["EarlyStopping"],
                    built["LearningRateMonitor"],
                ],
                logger=built["CSVLogger"],
                enable_progress_bar=False,
                enable_model_summary=False,
                **loop,
            )
        except MisconfigurationError as err:
            assert_good_message(str(err), "Trainer(")
            event("Trainer refused")
            return
        model = _Steps()
        x = torch.randn(8, 2, generator=torch.Generator().manual_seed(0))
        data = DataLoader(TensorDataset(x), batch_size=2)
        refused = ""
        try:
            trainer.fit(model, data, data)
        except MisconfigurationError as err:
            refused = str(err)
        if not refused:
            event("trained")
            return
        # A value the file system or the run decides: named with its fix. What only the data or
        # the module decides (a monitor never logged) may come after steps; these may not.
        event("fit refused")
        assert "Fix" in refused or "fix" in refused, refused
        if "writes into" in refused or "val_check_interval" in refused:
            assert model.steps == 0, f"refused after training had started: {refused}"
