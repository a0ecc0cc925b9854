"""Lightning 1.x's enums and type aliases that Lightning 2.x removed, with 1.x's behaviour:
``pytorch_lightning.utilities.DistributedType`` (1.1–1.7), ``DeviceType`` (1.1–1.7), ``AMPType``
(1.0–1.8), ``PrecisionType`` (1.5–1.9), their base ``LightningEnum`` (a ``str`` enum that equals
its value in any case: ``DistributedType.DDP == "DDP"``), and ``EPOCH_OUTPUT``
(``pytorch_lightning.utilities.types``, the type of the 1.x ``*_epoch_end(outputs)``)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from torch import Tensor

#: What a 1.x ``training_step`` returns, and what the 1.x epoch-end hooks receive a list of.
STEP_OUTPUT = Tensor | dict[str, Any]
EPOCH_OUTPUT = list[STEP_OUTPUT]


class LightningEnum(str, Enum):
    """A ``str`` enum whose members equal their value, and each other's, in any case."""

    @classmethod
    def from_str(cls, value: str) -> LightningEnum | None:
        """The member whose *name* is ``value`` in any case, else None (1.x's lookup)."""
        for name, member in cls.__members__.items():
            if name.lower() == value.lower():
                return member
        return None

    def __eq__(self, other: object) -> bool:
        theirs = other.value if isinstance(other, Enum) else str(other)
        return str(self.value).lower() == str(theirs).lower()

    def __hash__(self) -> int:  # equal in any case, so hashed in one
        return hash(str(self.value).lower())


class AMPType(LightningEnum):
    """1.x's mixed-precision backends (only ``native`` is left: ``precision=16``)."""

    APEX = "apex"
    NATIVE = "native"


class PrecisionType(LightningEnum):
    """1.x's precision values; ``PrecisionType.HALF == 16`` holds."""

    HALF = "16"
    FLOAT = "32"
    FULL = "64"
    BFLOAT = "bf16"
    MIXED = "mixed"

    @staticmethod
    def supported_type(precision: str | int) -> bool:
        return any(member == precision for member in PrecisionType)

    @staticmethod
    def supported_types() -> list[str]:
        return [member.value for member in PrecisionType]


class DistributedType(LightningEnum):
    """1.x's training types (``trainer._distrib_type``); 2.x names them by strategy."""

    DP = "dp"
    DDP = "ddp"
    DDP2 = "ddp2"
    DDP_CPU = "ddp_cpu"
    DDP_SPAWN = "ddp_spawn"
    TPU_SPAWN = "tpu_spawn"
    DEEPSPEED = "deepspeed"
    HOROVOD = "horovod"
    DDP_SHARDED = "ddp_sharded"
    DDP_SHARDED_SPAWN = "ddp_sharded_spawn"
    DDP_FULLY_SHARDED = "ddp_fully_sharded"
    RPC_SEQUENTIAL_PLUGIN = "rpc_sequential"
    HPU_PARALLEL = "hpu_parallel"

    @staticmethod
    def interactive_compatible_types() -> list[DistributedType]:
        """The types a notebook could run in 1.x (no script to re-run)."""
        return [
            DistributedType.DP,
            DistributedType.DDP_SPAWN,
            DistributedType.DDP_SHARDED_SPAWN,
            DistributedType.TPU_SPAWN,
        ]

    def is_interactive_compatible(self) -> bool:
        return self in DistributedType.interactive_compatible_types()


class DeviceType(LightningEnum):
    """1.x's device kinds (``trainer._device_type``)."""

    CPU = "CPU"
    GPU = "GPU"
    IPU = "IPU"
    TPU = "TPU"
