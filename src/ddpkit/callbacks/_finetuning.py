"""``BaseFinetuning`` and ``BackboneFinetuning``: freeze part of a module before training and
unfreeze it, into a new parameter group of the optimizer, at a chosen epoch — Lightning 2.x's
callbacks (``pytorch_lightning.callbacks.finetuning``: names, arguments, timing, state).

Where they differ from Lightning's, a resumed or distributed run trains what a plain one does:

- a resumed fit rebuilds the saved parameter groups *and* makes their parameters trainable
  again (Lightning's stay frozen by ``freeze_before_training``: the resumed run stops training);
- under DDP the parameters frozen when DDP wrapped the module (just before ``on_fit_start``) are
  outside its gradient all-reduce for good; once unfrozen, each rank would train its own copy
  (Lightning's issue #20340). The callback averages their gradients itself after the backward
  that ends an accumulation window, where DDP syncs its own (before 16-mixed unscales them);
- a parameter already in the optimizer is recognised by identity, not by value (Lightning's
  ``torch.equal`` took a second BatchNorm, ones and zeros alike, for the first and skipped it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.optim import Optimizer

from ddpkit.callbacks._base import Callback
from ddpkit.errors import DDPKitDeprecationWarning, DDPKitWarning, MisconfigurationError
from ddpkit.utilities._rank_zero import rank_zero_info, rank_zero_warn

if TYPE_CHECKING:
    from ddpkit.core._protocols import CallbackTrainer
    from ddpkit.plugins.training_type._base import TrainingTypePlugin

#: a module, or an iterable (nested at will) of modules
Modules: TypeAlias = nn.Module | Iterable[Any]


def multiplicative(epoch: int) -> float:
    """``BackboneFinetuning``'s default ``lambda_func``: the backbone's rate doubles each epoch."""
    return 2.0


def _takes_opt_idx(hook: Callable[..., Any]) -> bool:
    """Lightning 1.x's ``finetune_function(pl_module, epoch, optimizer, opt_idx)``."""
    try:
        params = list(inspect.signature(hook).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return len([p for p in params if p.kind in positional]) >= 4


def _average_gradients(strategy: TrainingTypePlugin, params: list[nn.Parameter]) -> None:
    """Average ``params``' gradients over the ranks as DDP averages its own: a rank without a
    gradient for a parameter adds zeros, and a parameter without one on every rank keeps none."""
    device = strategy.root_device
    has_grad = torch.tensor([float(p.grad is not None) for p in params], device=device)
    used = strategy.all_reduce(has_grad, "sum").tolist()
    buckets: dict[tuple[torch.device, torch.dtype], list[nn.Parameter]] = {}
    for param, count in zip(params, used):
        if count > 0:
            if param.grad is not None and param.grad.is_sparse:
                raise MisconfigurationError(
                    f"A finetuning callback under DDP cannot average a sparse gradient (a "
                    f"parameter of shape {tuple(param.shape)}). Fix: nn.Embedding(..., "
                    f"sparse=False) in what it unfreezes."
                )
            buckets.setdefault((param.device, param.dtype), []).append(param)
    for group in buckets.values():  # the same order on every rank: the module's
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in group]
        flat = torch.cat([g.reshape(-1) for g in grads]).div_(strategy.world_size)
        summed = strategy.all_reduce(flat, "sum")
        for param, piece in zip(group, summed.split([p.numel() for p in group])):
            chunk = piece.view_as(param).to(param.device)
            if param.grad is None:
                param.grad = chunk.clone()
            else:
                param.grad.copy_(chunk)


class BaseFinetuning(Callback):
    """Override ``freeze_before_training(pl_module)`` (``self.freeze(pl_module.encoder)``) and
    ``finetune_function(pl_module, epoch, optimizer)`` (at your epoch,
    ``self.unfreeze_and_add_param_group(pl_module.encoder, optimizer)``); build the optimizer over
    ``filter(lambda p: p.requires_grad, self.parameters())``. A 1.x override that takes
    ``opt_idx`` is passed it, with a ``DDPKitDeprecationWarning``."""

    def __init__(self) -> None:
        self._internal_optimizer_metadata: dict[int, list[dict[str, Any]]] = {}
        self._restarting = False
        #: under DDP: the parameters DDP left out (frozen when it wrapped the module)
        self._outside_ddp: list[nn.Parameter] = []
        self._sync_due = False

    def state_dict(self) -> dict[str, Any]:
        return {"internal_optimizer_metadata": self._internal_optimizer_metadata}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._restarting = True
        if "internal_optimizer_metadata" in state_dict:
            self._internal_optimizer_metadata = state_dict["internal_optimizer_metadata"]
        else:  # Lightning's checkpoints before its PR #11887 held the metadata itself
            self._internal_optimizer_metadata = state_dict  # type: ignore[assignment]

    # -- the hooks -----------------------------------------------------------------------------

    def setup(self, trainer: CallbackTrainer, pl_module: nn.Module, stage: str) -> None:
        self.freeze_before_training(pl_module)
        trains = any(p.requires_grad for p in pl_module.parameters())
        if stage == "fit" and trainer.world_size > 1 and not trains:
            raise MisconfigurationError(
                f"{type(self).__name__}.freeze_before_training froze every parameter of "
                f"{type(pl_module).__name__}, and DDP ({trainer.world_size} ranks) cannot wrap "
                f"a module with nothing to train (torch refuses it). Fix: leave the parameters "
                f"the first epochs train (the head) unfrozen."
            )

    def on_fit_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        # DDP wrapped the module just before this hook: what is frozen now, it does not sync.
        distributed = trainer.world_size > 1 and torch.distributed.is_initialized()
        self._outside_ddp = (
            [p for p in pl_module.parameters() if not p.requires_grad] if distributed else []
        )
        if self._restarting:  # the parameter groups of the run that wrote the checkpoint
            if self._internal_optimizer_metadata:
                self._restore_param_groups(trainer, pl_module)
            self._restarting = False

    def on_train_epoch_start(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        """Called when the epoch begins: ``finetune_function`` once per optimizer."""
        legacy = _takes_opt_idx(self.finetune_function)
        if legacy:
            rank_zero_warn(
                f"{type(self).__name__}.finetune_function(pl_module, epoch, optimizer, "
                f"opt_idx): Lightning 2.x calls it without opt_idx. Fix: def "
                f"finetune_function(self, pl_module, epoch, optimizer).",
                DDPKitDeprecationWarning,
            )
        hook: Callable[..., None] = self.finetune_function
        for opt_idx, optimizer in enumerate(trainer.optimizers):
            num_param_groups = len(optimizer.param_groups)
            hook(pl_module, trainer.current_epoch, optimizer, *([opt_idx] if legacy else []))
            self._store(pl_module, opt_idx, num_param_groups, optimizer.param_groups)

    def on_train_batch_start(
        self, trainer: CallbackTrainer, pl_module: nn.Module, batch: Any, batch_idx: int
    ) -> None:
        if self._outside_ddp:  # the batch that ends an accumulation window (DDP syncs then)
            accumulate = trainer.accumulate_grad_batches
            self._sync_due = trainer.is_last_batch or (batch_idx + 1) % accumulate == 0

    def on_after_backward(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        if self._outside_ddp and self._sync_due:
            trainable = [p for p in self._outside_ddp if p.requires_grad]
            if trainable:
                _average_gradients(trainer.strategy, trainable)

    def finetune_function(self, pl_module: Any, epoch: int, optimizer: Optimizer) -> None:
        """Override to add your unfreeze logic."""
        raise NotImplementedError

    def freeze_before_training(self, pl_module: Any) -> None:
        """Override to add your freeze logic."""
        raise NotImplementedError

    # -- freezing and unfreezing ---------------------------------------------------------------

    @staticmethod
    def flatten_modules(modules: Modules) -> list[nn.Module]:
        """The leaf modules of ``modules`` (a module or an iterable of them), and the modules
        that hold parameters themselves."""
        if isinstance(modules, nn.ModuleDict):
            modules = modules.values()
        found: Iterable[nn.Module]
        if isinstance(modules, Iterable):
            found = [m for item in modules for m in BaseFinetuning.flatten_modules(item)]
        else:
            found = modules.modules()
        return [m for m in found if not list(m.children()) or m._parameters]

    @staticmethod
    def filter_params(
        modules: Modules, train_bn: bool = True, requires_grad: bool = True
    ) -> Iterator[nn.Parameter]:
        """``modules``' parameters whose ``requires_grad`` is ``requires_grad`` (``train_bn``)."""
        for mod in BaseFinetuning.flatten_modules(modules):
            if isinstance(mod, _BatchNorm) and not train_bn:
                continue
            for param in mod.parameters(recurse=False):  # a parent's own, not its children's
                if param.requires_grad == requires_grad:
                    yield param

    @staticmethod
    def make_trainable(modules: Modules) -> None:
        """Unfreeze the parameters of ``modules`` (a BatchNorm tracks its statistics again)."""
        for module in BaseFinetuning.flatten_modules(modules):
            if isinstance(module, _BatchNorm):
                module.track_running_stats = True
            for param in module.parameters(recurse=False):
                param.requires_grad = True

    @staticmethod
    def freeze_module(module: nn.Module) -> None:
        """Freeze ``module``'s own parameters (a BatchNorm stops tracking its statistics)."""
        if isinstance(module, _BatchNorm):
            module.track_running_stats = False
        for param in module.parameters(recurse=False):
            param.requires_grad = False

    @staticmethod
    def freeze(modules: Modules, train_bn: bool = True) -> None:
        """Freeze ``modules``' parameters; ``train_bn`` leaves the BatchNorm layers trainable."""
        for mod in BaseFinetuning.flatten_modules(modules):
            if isinstance(mod, _BatchNorm) and train_bn:
                BaseFinetuning.make_trainable(mod)
            else:
                BaseFinetuning.freeze_module(mod)

    @staticmethod
    def filter_on_optimizer(optimizer: Optimizer, params: Iterable[Any]) -> list[Any]:
        """``params`` less those already in one of ``optimizer``'s parameter groups (warned)."""
        present = {id(p) for group in optimizer.param_groups for p in group["params"]}
        params = list(params)
        out_params = [param for param in params if id(param) not in present]
        if len(out_params) < len(params):
            rank_zero_warn(
                "The provided params to be frozen already exist within another group of this "
                "optimizer. Those parameters will be skipped.\nHINT: Did you init your optimizer "
                f"in `configure_optimizer` as such:\n {type(optimizer)}(filter(lambda p: "
                "p.requires_grad, self.parameters()), ...) ",
                DDPKitWarning,
            )
        return out_params

    @staticmethod
    def unfreeze_and_add_param_group(
        modules: Modules,
        optimizer: Optimizer,
        lr: float | None = None,
        initial_denom_lr: float = 10.0,
        train_bn: bool = True,
    ) -> None:
        """Unfreeze ``modules`` and add their parameters to ``optimizer`` as a new group, at
        ``lr`` (default: the first group's rate over ``initial_denom_lr``)."""
        BaseFinetuning.make_trainable(modules)
        params_lr = optimizer.param_groups[0]["lr"] if lr is None else float(lr)
        denom_lr = initial_denom_lr if lr is None else 1.0
        params = BaseFinetuning.filter_params(modules, train_bn=train_bn, requires_grad=True)
        kept = BaseFinetuning.filter_on_optimizer(optimizer, params)
        if kept:
            optimizer.add_param_group({"params": kept, "lr": params_lr / denom_lr})

    @staticmethod
    def _apply_mapping_to_param_groups(
        param_groups: list[dict[str, Any]], mapping: dict[Any, Any]
    ) -> list[dict[str, Any]]:
        return [  # every setting of each group, its parameters mapped (to names, or back)
            {**group, "params": [mapping[p] for p in group["params"]]} for group in param_groups
        ]

    def _store(
        self,
        pl_module: nn.Module,
        opt_idx: int,
        num_param_groups: int,
        current_param_groups: list[dict[str, Any]],
    ) -> None:
        mapping = {p: n for n, p in pl_module.named_parameters()}
        # every group the first time; after that, the groups added this epoch
        new = num_param_groups if opt_idx in self._internal_optimizer_metadata else 0
        self._internal_optimizer_metadata.setdefault(opt_idx, []).extend(
            self._apply_mapping_to_param_groups(current_param_groups[new:], mapping)
        )

    def _restore_param_groups(self, trainer: CallbackTrainer, pl_module: nn.Module) -> None:
        """The saved groups back in each optimizer, their parameters trainable again."""
        named_parameters = dict(pl_module.named_parameters())
        restored: set[int] = set()
        for opt_idx, optimizer in enumerate(trainer.optimizers):
            if opt_idx in self._internal_optimizer_metadata:
                param_groups = self._apply_mapping_to_param_groups(
                    self._internal_optimizer_metadata[opt_idx], named_parameters
                )
                optimizer.param_groups = param_groups
                restored |= {id(p) for group in param_groups for p in group["params"]}
        owners = [
            m
            for m in self.flatten_modules(pl_module)
            if any(id(p) in restored for p in m.parameters(recurse=False))
        ]
        self.make_trainable(owners)


class BackboneFinetuning(BaseFinetuning):
    """Train the module's ``backbone`` (an ``nn.Module``) from ``unfreeze_backbone_at_epoch``
    on, at ``backbone_initial_lr`` (default: the optimizer's rate × ``backbone_initial_ratio_lr``)
    times ``lambda_func(epoch + 1)`` each later epoch, capped at the optimizer's own rate with
    ``should_align``; ``train_bn`` trains its BatchNorm layers; ``verbose`` logs both rates."""

    def __init__(
        self,
        unfreeze_backbone_at_epoch: int = 10,
        lambda_func: Callable[[int], float] = multiplicative,
        backbone_initial_ratio_lr: float = 10e-2,
        backbone_initial_lr: float | None = None,
        should_align: bool = True,
        initial_denom_lr: float = 10.0,
        train_bn: bool = True,
        verbose: bool = False,
        rounding: int = 12,
    ) -> None:
        super().__init__()
        self.unfreeze_backbone_at_epoch = unfreeze_backbone_at_epoch
        self.lambda_func = lambda_func
        self.backbone_initial_ratio_lr = backbone_initial_ratio_lr
        self.backbone_initial_lr = backbone_initial_lr
        self.should_align = should_align
        self.initial_denom_lr = initial_denom_lr
        self.train_bn = train_bn
        self.verbose = verbose
        self.rounding = rounding
        self.previous_backbone_lr: float | None = None

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "previous_backbone_lr": self.previous_backbone_lr}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.previous_backbone_lr = state_dict["previous_backbone_lr"]
        super().load_state_dict(state_dict)

    def setup(self, trainer: CallbackTrainer, pl_module: nn.Module, stage: str) -> None:
        # Checked before freeze_before_training reads it (Lightning's check, in on_fit_start,
        # comes after that read has raised an AttributeError).
        if not isinstance(getattr(pl_module, "backbone", None), nn.Module):
            found = type(getattr(pl_module, "backbone", None)).__name__
            raise MisconfigurationError(
                f"BackboneFinetuning: The LightningModule should have a nn.Module `backbone` "
                f"attribute; {type(pl_module).__name__}.backbone is "
                f"{'missing' if found == 'NoneType' else 'a ' + found}. Fix: set self.backbone "
                f"to the nn.Module to freeze and unfreeze, or subclass BaseFinetuning."
            )
        super().setup(trainer, pl_module, stage)

    def freeze_before_training(self, pl_module: Any) -> None:
        self.freeze(pl_module.backbone)

    def finetune_function(self, pl_module: Any, epoch: int, optimizer: Optimizer) -> None:
        """Called when the epoch begins."""
        current_lr = optimizer.param_groups[0]["lr"]
        if epoch == self.unfreeze_backbone_at_epoch:
            initial_backbone_lr = (
                self.backbone_initial_lr
                if self.backbone_initial_lr is not None
                else current_lr * self.backbone_initial_ratio_lr
            )
            self.previous_backbone_lr = initial_backbone_lr
            self.unfreeze_and_add_param_group(
                pl_module.backbone,
                optimizer,
                initial_backbone_lr,
                train_bn=self.train_bn,
                initial_denom_lr=self.initial_denom_lr,
            )
            self._say(current_lr, initial_backbone_lr)
        elif epoch > self.unfreeze_backbone_at_epoch:
            if self.previous_backbone_lr is None:
                raise MisconfigurationError(
                    f"BackboneFinetuning(unfreeze_backbone_at_epoch="
                    f"{self.unfreeze_backbone_at_epoch}) at epoch {epoch}: the backbone was "
                    f"never unfrozen (a fit resumed from a checkpoint without this callback's "
                    f"state?). Fix: resume from a checkpoint written with BackboneFinetuning, or "
                    f"unfreeze_backbone_at_epoch={epoch}."
                )
            next_lr = self.lambda_func(epoch + 1) * self.previous_backbone_lr
            next_lr = current_lr if (self.should_align and next_lr > current_lr) else next_lr
            optimizer.param_groups[-1]["lr"] = next_lr
            self.previous_backbone_lr = next_lr
            self._say(current_lr, next_lr)

    def _say(self, current_lr: float, backbone_lr: float) -> None:
        if self.verbose:
            rank_zero_info(
                f"Current lr: {round(current_lr, self.rounding)}, "
                f"Backbone lr: {round(backbone_lr, self.rounding)}"
            )
