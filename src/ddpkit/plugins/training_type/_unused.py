"""The unused-parameter failure, said first and by name.

With ``find_unused_parameters=False``, DDP expects a gradient for every parameter at every step;
a layer that took no part in the loss makes the next step fail with torch's "Expected to have
finished reduction in the prior iteration ...", a paragraph about DDP's internals that names the
parameters by *index* ("Parameter indices which did not receive grad for rank 1: 2 3"). ddpkit
raises :class:`~ddpkit.errors.UnusedParametersError` in its place: the parameters by name
(``aux_head.weight``), the one-line fix, then torch's own message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ddpkit.errors import UnusedParametersError

#: torch's error when a parameter took no part in the loss and DDP waits for its gradient
_UNUSED = re.compile(r"Expected to have finished reduction in the prior iteration")
#: where torch lists them: by index, or (TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL) by name
_INDICES = re.compile(r"Parameter indices which did not receive grad for rank (\d+): ([\d ]+)")
_NAMES = re.compile(r"Parameters which did not receive grad for rank (\d+): ([^\n]+)")


def parameter_names(ddp: Any) -> list[str]:
    """The names of the parameters a ``DistributedDataParallel`` reduces, in the order of its
    indices: torch's own order (``DistributedDataParallel._build_params_for_reducer``), the
    parameters that need a gradient, module by module, each once. A wrapper's ``module.``
    prefix (ddpkit routes ``training_step`` through one) is left off."""
    ignored = set(getattr(ddp, "parameters_to_ignore", ()))
    names: list[str] = []
    seen: set[int] = set()
    for module_name, module in ddp.module.named_modules():
        for name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or f"{module_name}.{name}" in ignored or id(param) in seen:
                continue
            seen.add(id(param))
            names.append(f"{module_name}.{name}" if module_name else name)
    if names and all(n.startswith("module.") for n in names):
        names = [n.removeprefix("module.") for n in names]
    return names


def _unused(message: str, ddp: Any) -> tuple[str, list[str]]:
    """The rank torch named and the names of the parameters it listed ('' and [] when it
    listed none)."""
    by_name = _NAMES.search(message)
    if by_name:
        listed = [n.strip() for n in by_name.group(2).split(",") if n.strip()]
        return by_name.group(1), [n.removeprefix("module.") for n in listed]
    by_index = _INDICES.search(message)
    if not by_index:
        return "", []
    names = parameter_names(ddp) if ddp is not None else []
    indices = [int(i) for i in by_index.group(2).split()]
    return by_index.group(1), [names[i] if i < len(names) else f"#{i}" for i in indices]


def _listed(names: list[str]) -> str:
    shown = names[:6]
    more = f" and {len(names) - 6} more" if len(names) > 6 else ""
    text = ", ".join(shown[:-1]) + (f" and {shown[-1]}" if len(shown) > 1 else shown[0])
    return text + more


def unused_parameters_error(
    exc: BaseException, plugin: Any, ddp_ref: Callable[[], Any] | None
) -> UnusedParametersError | None:
    """ddpkit's error for torch's unused-parameter failure ``exc`` in ``plugin`` (``ddp_ref``:
    a weak reference to the ``DistributedDataParallel`` of the stage); None for any other
    error, and where the plugin looks for unused parameters."""
    if getattr(plugin, "find_unused_parameters", False):
        return None
    first = _UNUSED.search(str(exc)) if isinstance(exc, RuntimeError) else None
    if first is None:
        return None
    ddp = ddp_ref() if ddp_ref is not None else None
    rank, names = _unused(str(exc), ddp)
    kind = type(plugin).__name__
    name = "ddp_spawn" if getattr(plugin, "name", "ddp") == "ddp_spawn" else "ddp"
    if names:
        on = f" on rank {rank}" if rank else ""
        what = (
            f"{_listed(names)} took no part in the loss of training_step{on}, and DDP waits for "
            f"their gradients"
        )
    else:
        what = (
            "a parameter of the model took no part in the loss of training_step, and DDP waits "
            "for its gradient"
        )
    sentence = str(exc)[first.start() :].split(". ")[0].strip().rstrip(".")
    return UnusedParametersError(
        f"{plugin!r}: {what}.\n"
        f"Fix: pass strategy='{name}_find_unused_parameters_true' (or "
        f"plugins=[{kind}(find_unused_parameters=True)]); or use every parameter in the loss.\n"
        f"(torch's error: {sentence}.)"
    )
