"""The members of Lightning 1.x's ``Trainer``, ``LightningModule``, ``LightningDataModule`` and
``Callback`` in the 1.x surface table, each with one status.

A member is a *hook* (the user's code defines it, Lightning calls it: ``training_step``,
``on_epoch_end``, a callback's every method) or an *API* (the user's code calls it:
``self.log``, ``trainer.gpus``):

- a hook is ``provided`` when ddpkit carries a 1.x override of it
  (:data:`ddpkit.lightning._adapters.ADAPTED`), ``unchanged`` when Lightning 2.x calls it with
  the arguments each 1.x signature of it takes, else its :data:`MEMBER_RULES` entry — a refused
  hook is refused before any rank starts when a module or callback defines it, an out-of-scope
  one is warned about;
- an API member is ``provided`` when ddpkit's class defines it, ``unchanged`` when Lightning
  2.x's has it and takes each 1.x signature's parameters, else its :data:`MEMBER_RULES` entry —
  using a refused or out-of-scope one raises ``LightningRemovedAttributeError`` with the note.
"""

from __future__ import annotations

import ast
import functools
import inspect
import warnings
from typing import Any

from ddpkit.lightning._surface.member_rules import HOOKS, MEMBER_RULES, OWNERS


def role(owner: str, name: str) -> str:
    """``"hook"`` or ``"api"`` (see the module)."""
    if owner == "Trainer":
        return "api"
    if owner == "Callback":
        return "api" if name in ("__init__", "state_key") else "hook"
    return "hook" if name in HOOKS.get(owner, ()) or name.startswith("on_") else "api"


@functools.cache
def _classes() -> dict[str, tuple[type, type, Any]]:
    """owner → (Lightning 2.x's class, ddpkit's class, an instance of Lightning 2.x's)."""
    import pytorch_lightning as pl

    from ddpkit.lightning._callback import Callback
    from ddpkit.lightning._datamodule import LightningDataModule
    from ddpkit.lightning._module import LightningModule
    from ddpkit.lightning._trainer import Trainer

    class _Module(pl.LightningModule):
        pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False)  # fmt: skip
        return {
            "Trainer": (pl.Trainer, Trainer, trainer),
            "LightningModule": (pl.LightningModule, LightningModule, _Module()),
            "LightningDataModule": (
                pl.LightningDataModule,
                LightningDataModule,
                pl.LightningDataModule(),
            ),
            "Callback": (pl.Callback, Callback, pl.Callback()),
        }


def _parameters(signature: str) -> list[tuple[str, bool, str]]:
    """``"(self, a, b=1, *args, **kw)"`` → [(name, has default, kind)] without self/cls."""
    tree = ast.parse(f"def f{signature}: pass").body[0]
    assert isinstance(tree, ast.FunctionDef)
    args = tree.args
    positional = [*args.posonlyargs, *args.args]
    defaults = len(args.defaults)
    found = [
        (a.arg, i >= len(positional) - defaults, "positional") for i, a in enumerate(positional)
    ]
    found += [(a.arg, True, "keyword") for a in args.kwonlyargs]
    if args.vararg:
        found.append((args.vararg.arg, True, "*args"))
    if args.kwarg:
        found.append((args.kwarg.arg, True, "**kwargs"))
    return [p for p in found if p[0] not in ("self", "cls")]


def _accepts_call(old: list[tuple[str, bool, str]], new: inspect.Signature) -> bool:
    """Does 2.x's ``new`` take every call 1.x's signature ``old`` took (names and order)?"""
    params = [p for p in new.parameters.values() if p.name not in ("self", "cls")]
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in params)
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = {p.name for p in params}
    for index, (name, _, kind) in enumerate(p for p in old):
        if kind == "positional" and index < len(positional) and positional[index] == name:
            continue
        if kind == "positional" and index >= len(positional) and not var_pos:
            return False
        if kind in ("*args", "**kwargs"):
            continue
        if name not in names and not var_kw:
            return False
    return True


def _called_alike(old: list[tuple[str, bool, str]], new: inspect.Signature) -> bool:
    """Does 2.x call a hook with as many positional arguments as 1.x's override takes?"""
    if any(p.kind is p.VAR_POSITIONAL for p in new.parameters.values()):
        return True  # Lightning reads the override's signature (predict_step's dataloader_idx)
    passed = sum(
        1
        for p in new.parameters.values()
        if p.name not in ("self", "cls") and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )
    if any(kind == "*args" for _, _, kind in old):
        return True
    takes = [has_default for _, has_default, kind in old if kind == "positional"]
    return sum(1 for d in takes if not d) <= passed <= len(takes)


def _status(owner: str, name: str, fact: dict[str, Any]) -> dict[str, str] | None:
    from ddpkit.lightning._adapters import ADAPTED

    theirs, ours, instance = _classes()[owner]
    signatures = [_parameters(s) for s in fact.get("signature", {}).values()]
    kind = role(owner, name)
    if kind == "hook":
        adapted = ADAPTED.get(f"{OWNERS[owner]}.{name}")
        if adapted is not None:
            return {"status": "provided", "note": f"ddpkit calls a 1.x override {adapted}"}
        base = getattr(theirs, name, None)
        if callable(base):
            new = inspect.signature(base)
            if all(_called_alike(s, new) for s in signatures):
                return {"status": "unchanged"}
        elif base is not None:
            return {"status": "unchanged"}
        return None
    if any(name in vars(c) for c in ours.__mro__ if c.__module__.startswith("ddpkit.")):
        return {"status": "provided"}
    found = getattr(theirs, name, None)
    if found is None and not _has_instance_attribute(instance, name):
        return None
    if callable(found) and not isinstance(found, type):
        new = inspect.signature(found)
        if not all(_accepts_call(s, new) for s in signatures):
            return None
    return {"status": "unchanged"}


def _has_instance_attribute(instance: Any, name: str) -> bool:
    try:
        return name in vars(instance) or hasattr(instance, name)
    except Exception:  # a property that needs a running stage: it exists
        return True


def member_table(facts: dict[str, Any], missing: list[str]) -> dict[str, Any]:
    """Every member of the four classes with its status; each one without adds to
    ``missing``."""
    table: dict[str, Any] = {}
    for owner, info in sorted(facts["classes"].items()):
        for name, fact in sorted(info["members"].items()):
            if name.startswith("_") and name != "__init__":
                continue
            key = f"{owner}.{name}"
            status = _status(owner, name, fact)
            if status is None and key in MEMBER_RULES:
                rule_status, note = MEMBER_RULES[key]
                status = {"status": rule_status, "note": note}
            if status is None:
                missing.append(f"member {key} ({role(owner, name)}, {fact['kind']})")
                continue
            versions = fact["versions"]
            table[key] = {"since": versions[0], "until": versions[-1], "kind": fact["kind"],
                          "role": role(owner, name), **status}  # fmt: skip
    return table
