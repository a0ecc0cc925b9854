"""The launcher of an interactive session (a Jupyter notebook, an IPython shell, ``python -c``).

There is no script to re-run (``ddp``'s subprocess launcher), and a spawned rank cannot import
the classes a notebook cell defined (``ddp_spawn``): the ranks are *forked* from this process
(``strategy="ddp_notebook"``, Lightning 2.x's name; ``"ddp_fork"`` is the same), so that they
inherit everything the session defined. The rules:

- a launcher the user did not name — the device count's default (``accelerator="cpu",
  devices=2``: ``ddp``) or 1.x's ambiguous ``accelerator="ddp_cpu"`` default (spawn, which could
  not run a notebook's classes in 1.x either) — becomes the fork launcher, and the plan says so
  in one line: the same call works in a script and in a notebook;
- a launcher the user named is used as given: ``strategy="ddp"`` / ``DDPPlugin`` is refused here,
  naming ``strategy="ddp_notebook"``; ``ddp_spawn`` runs, and the spawn launcher refuses it before
  any rank starts if what it would pickle names a class of the notebook (``__main__``).
"""

from __future__ import annotations

from ddpkit.connector._plan import Choice
from ddpkit.connector._translate import Request
from ddpkit.connector._types import LauncherName, TrainingTypeName
from ddpkit.errors import MisconfigurationError

FORK_REASON = (
    "ddp_notebook: each rank is forked from this process (a notebook's classes need no file); "
    "one intra-op thread a rank"
)


def interactive_launcher(
    req: Request,
    training_type: Choice[TrainingTypeName],
    launcher: Choice[LauncherName],
    interactive: bool,
) -> tuple[Choice[TrainingTypeName], Choice[LauncherName], str | None]:
    """The training type and launcher an interactive session runs, and the line that says why
    when they are not what the call asked for (see the module)."""
    if not interactive or launcher.value not in ("subprocess", "spawn"):
        return training_type, launcher, None
    named = req.training_type is not None or req.training_type_instance is not None
    if named:
        if launcher.value == "subprocess":
            raise MisconfigurationError(
                f"{req.call}: DDP re-runs the script for the other ranks, but this session has "
                f"no script to re-run (a notebook, an interactive shell or `python -c`). Fix: "
                f"strategy='ddp_notebook' (the ranks are forked from this session), or run the "
                f"code from a script (python train.py)."
            )
        return training_type, launcher, None  # spawn as named: the launcher checks __main__
    note = (
        f"{req.call}: this is an interactive session (a notebook, an IPython shell or "
        f"`python -c`): there is no script to re-run, and spawned ranks cannot import what its "
        f"cells defined, so the ranks are forked from it, as strategy='ddp_notebook' does. "
        f"Fix: pass strategy='ddp_notebook' to say so, or run the code from a script."
    )
    return (
        Choice("ddp_spawn", f"{training_type.reason}, in an interactive session: forked ranks"),
        Choice("fork", FORK_REASON),
        note,
    )
