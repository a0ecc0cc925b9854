"""Every private name of Lightning 2.x that ``ddpkit.lightning`` still uses, in one place, each
with why: a name here is one a Lightning release may rename without notice.

The functions and classes are imported here and only here (``tests/test_structure.py`` holds
that); the private attributes ddpkit reads, sets, calls or overrides on Lightning's objects are
:data:`MEMBERS`, which ``tests/lightning/test_lightning_private.py`` holds to the installed
Lightning, so that a release that renames one fails there first.
"""

from __future__ import annotations

# The precisions Lightning 2.x takes, as its own type: _translate checks a Trainer's precision
# against them by type too (Lightning's own check lets 32.0 through).
from lightning_fabric.connector import _PRECISION_INPUT  # type: ignore[attr-defined]

# configure_optimizers' return parsed as Lightning parses it, for 1.x's several optimizers
# (_multi_optimizer: Lightning 2.x refuses them in automatic optimization).
from pytorch_lightning.core.optimizer import (
    _configure_optimizers,
    _configure_schedulers_automatic_opt,
)

# An in-process restart sets every loop of the fit loop back to a fresh fit (_restart).
from pytorch_lightning.loops.loop import _Loop

# The launcher interface of Lightning's strategies, which ddpkit's launchers implement
# (_launchers), and Lightning's spawn launcher, whose results ddpkit's spawn brings back the
# same way, with the parent's global state (RNG, deterministic flags) restored in each rank.
from pytorch_lightning.strategies.launchers.launcher import _Launcher
from pytorch_lightning.strategies.launchers.multiprocessing import (
    _GlobalStateSnapshot,
    _MultiProcessingLauncher,
)

# The hooks as Lightning's loop calls them (with its profiling and ordering), for 1.x's several
# optimizers (_multi_optimizer); the callbacks' states carried back from a spawned rank zero
# (_launchers); and how Lightning ends a failed fit, for an in-process restart (_restart).
from pytorch_lightning.trainer.call import (
    _call_callback_hooks,
    _call_callbacks_load_state_dict,
    _call_callbacks_state_dict,
    _call_lightning_module_hook,
    _interrupt,
)

# Where a fit restores its checkpoint: a restarted fit chooses the newest complete one there
# (_restart.RestartConnector).
from pytorch_lightning.trainer.connectors.checkpoint_connector import _CheckpointConnector

__all__ = [
    "MEMBERS",
    "_CheckpointConnector",
    "_GlobalStateSnapshot",
    "_Launcher",
    "_Loop",
    "_MultiProcessingLauncher",
    "_PRECISION_INPUT",
    "_call_callback_hooks",
    "_call_callbacks_load_state_dict",
    "_call_callbacks_state_dict",
    "_call_lightning_module_hook",
    "_configure_optimizers",
    "_configure_schedulers_automatic_opt",
    "_interrupt",
]

#: (class, its private member, where ddpkit uses it and why); a member set in ``__init__``
#: rather than on the class is checked on an instance.
_CONNECTOR = "pytorch_lightning.trainer.connectors.checkpoint_connector._CheckpointConnector"
_SPAWN = "pytorch_lightning.strategies.launchers.multiprocessing._MultiProcessingLauncher"
_DDP = "pytorch_lightning.strategies.DDPStrategy"
MEMBERS: tuple[tuple[str, str, str], ...] = (
    ("pytorch_lightning.Trainer", "_teardown", "_restart: end a failed attempt as Lightning does"),
    ("pytorch_lightning.Trainer", "_checkpoint_connector", "_trainer: ddpkit's RestartConnector"),
    (_CONNECTOR, "_restore_modules_and_callbacks", "_restart: a restarted fit's checkpoint"),
    (_CONNECTOR, "_loaded_checkpoint", "_restart: where a restarted fit stands, its RNG states"),
    (_SPAWN, "_collect_rank_zero_results", "_launchers: a spawned rank zero's results"),
    (_SPAWN, "_recover_results_in_main_process", "_launchers: those results in the parent"),
    (_SPAWN, "_start_method", "_launchers, _trainer_1x: spawn, fork or forkserver"),
    (_DDP, "_ddp_kwargs", "_multi_optimizer: the DDP options of a 1.x multi-optimizer fit"),
    (_DDP, "_configure_launcher", "_supervised: ddpkit's launchers start the ranks"),
    (_DDP, "_launcher", "_supervised: the launcher the strategy's stages go through"),
    (_DDP, "_process_group_backend", "_supervised: the backend of the plan"),
    (_DDP, "_start_method", "_supervised: the start method of the plan"),
    (
        "pytorch_lightning.core.optimizer.LightningOptimizer",
        "_to_lightning_optimizer",
        "_multi_optimizer: each of 1.x's optimizers wrapped as Lightning wraps one",
    ),
    (
        "pytorch_lightning.loops.training_epoch_loop._TrainingEpochLoop",
        "_update_learning_rates",
        "_multi_optimizer: the schedulers stepped as Lightning steps them",
    ),
    ("pytorch_lightning.LightningModule", "_trainer", "_module: the trainer, read without raising"),
    (
        "pytorch_lightning.loggers.CSVLogger",
        "_flush_logs_every_n_steps",
        "_trainer: 1.x's Trainer(flush_logs_every_n_steps=...) on every CSVLogger",
    ),
    (
        "pytorch_lightning.cli.LightningCLI",
        "_add_configure_optimizers_method_to_model",
        "_cli: 1.x's optimizer and scheduler arguments of the CLI",
    ),
)
