"""The 1.x surface table: built from the facts of the 1.x wheels, every entry with a status, and
every status what ddpkit.lightning does.

- The committed table (``surface_1x.json``) and its page are what the rules give against the
  installed Lightning (``scripts/lightning_1x_table.py`` writes both).
- Every module and name does what its entry says: *unchanged* is Lightning 2.x's own object at
  the same path, *provided* the object the entry names, *refused* / *out of scope* raise
  ``LightningRemovedError`` with the entry's note.
- Every member does: an API member of ``Trainer``, ``LightningModule`` or
  ``LightningDataModule`` is there (*unchanged*, *provided*) or raises
  ``LightningRemovedAttributeError`` with its note; a hook the table refuses is refused before
  any rank starts when a module or callback defines it, an out-of-scope one warns. (That the
  *provided* hooks are called as 1.x called them: test_hooks_1x.py.)
"""

from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="the `lightning` extra is not installed")

from ddpkit._lightning_surface.build import dumps  # noqa: E402
from ddpkit.errors import (  # noqa: E402
    LightningRemovedAttributeError,
    LightningRemovedError,
    MisconfigurationError,
)
from ddpkit.lightning._surface import STATUSES, build, load, page  # noqa: E402

SURFACE = Path(build.__file__).parent
PAGE = Path(__file__).resolve().parents[2] / "docs" / "lightning-1x-surface.md"
TABLE = load()


def _object(target: str) -> Any:
    module, _, attrs = target.partition(":")
    value: Any = importlib.import_module(module)
    for attr in filter(None, attrs.split(".")):
        value = getattr(value, attr)
    return value


def _mirror(path: str) -> str:
    return "ddpkit.lightning" + path[len("pytorch_lightning") :]


def test_the_table_is_what_the_rules_give_for_the_facts() -> None:
    facts = json.loads((SURFACE / "facts_1x.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rebuilt = build.build_table(facts)
    assert dumps(rebuilt) == (SURFACE / "surface_1x.json").read_text(), (
        "surface_1x.json is stale: run .venv/bin/python scripts/lightning_1x_table.py"
    )
    assert page.render(rebuilt) == PAGE.read_text(), (
        "docs/lightning-1x-surface.md is stale: run .venv/bin/python scripts/lightning_1x_table.py"
    )


def test_every_entry_of_the_facts_has_a_status_and_a_reason_where_it_needs_one() -> None:
    facts = json.loads((SURFACE / "facts_1x.json").read_text())
    expected = {f"{m}.{n}" for m, info in facts["modules"].items() for n in info["names"]}
    assert set(TABLE["names"]) == expected
    assert set(TABLE["modules"]) == set(facts["modules"])
    kinds = ("names", "modules", "members")
    entries = [(key, entry) for kind in kinds for key, entry in TABLE[kind].items()]
    assert len(entries) > 4000
    gaps = [key for key, entry in entries if entry.get("status") not in STATUSES]
    assert not gaps, f"entries without a status: {gaps[:20]}"
    unexplained = [
        key
        for key, entry in entries
        if entry["status"] in ("refused", "out of scope") and not entry.get("note")
    ]
    assert not unexplained, f"refused or out of scope without a note: {unexplained[:20]}"
    no_fix = [
        key
        for key, entry in entries
        if entry["status"] == "refused" and "Fix:" not in entry["note"]
    ]
    assert not no_fix, f"refused without a fix: {no_fix[:20]}"


def _module_failure(path: str, entry: dict[str, Any]) -> str | None:
    try:
        module = importlib.import_module(_mirror(path))
    except LightningRemovedError as err:
        if entry["status"] in ("refused", "out of scope") and entry["note"] in str(err):
            return None
        return f"{path}: {entry['status']}, but importing it raised {err}"
    except ImportError as err:  # an optional dependency of Lightning's own module
        return (
            None
            if "No module named" in str(err) and entry["status"] == "unchanged"
            else (f"{path}: {err}")
        )
    if entry["status"] in ("refused", "out of scope") and entry.get("names"):
        return None  # the module stands for the names ddpkit provides in it
    return None if module is not None else f"{path}: no module"


def test_every_module_does_what_its_entry_says() -> None:
    failures = [
        failure
        for path, entry in sorted(TABLE["modules"].items())
        if (failure := _module_failure(path, entry)) is not None
    ]
    assert not failures, "\n".join(failures[:30])


def _name_failure(dotted: str, entry: dict[str, Any]) -> str | None:
    path, _, name = dotted.rpartition(".")
    module_entry = TABLE["modules"][path]
    try:
        module = importlib.import_module(_mirror(path))
        value = getattr(module, name)
    except LightningRemovedError as err:
        refused = entry["status"] in ("refused", "out of scope")
        said = entry.get("note", "") in str(err) or module_entry.get("note", "") in str(err)
        return None if refused and said else f"{dotted}: {entry['status']}, raised {err}"
    except ImportError:
        return None if entry["status"] == "unchanged" else f"{dotted}: optional import failed"
    # A module name is its mirror, which stands for the module the entry names.
    value = getattr(value, "__lightning_module__", value)
    if entry["status"] == "unchanged":
        theirs = getattr(importlib.import_module(path), name)
        return None if value is theirs else f"{dotted}: unchanged, but not Lightning's object"
    if entry["status"] == "provided":
        return None if value is _object(entry["target"]) else f"{dotted}: not {entry['target']}"
    return f"{dotted}: {entry['status']}, but it resolved to {value!r}"


def test_every_name_does_what_its_entry_says() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        failures = [
            failure
            for dotted, entry in sorted(TABLE["names"].items())
            if (failure := _name_failure(dotted, entry)) is not None
        ]
    assert not failures, "\n".join(failures[:30])


@pytest.fixture(scope="module")
def instances() -> dict[str, Any]:
    from ddpkit.lightning import LightningDataModule, LightningModule, Trainer

    class Module(LightningModule):
        pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    return {
        "Trainer": trainer,
        "LightningModule": Module(),
        "LightningDataModule": LightningDataModule(),
    }


def _member_failure(obj: Any, key: str, entry: dict[str, Any]) -> str | None:
    name = key.partition(".")[2]
    try:
        getattr(obj, name)
    except LightningRemovedAttributeError as err:
        refused = entry["status"] in ("refused", "out of scope") and entry["note"] in str(err)
        return None if refused else f"{key}: {entry['status']}, raised {err}"
    except (RuntimeError, AttributeError, TypeError) as err:
        # A property that needs a running stage (an attached Trainer, a fit's optimizers)
        if entry["status"] in ("unchanged", "provided") and not isinstance(
            err, LightningRemovedAttributeError
        ):
            return None
        return f"{key}: {entry['status']}, raised {type(err).__name__}: {err}"
    if entry["status"] in ("refused", "out of scope"):
        return f"{key}: {entry['status']}, but it is there"
    return None


def test_every_api_member_does_what_its_entry_says(instances: dict[str, Any]) -> None:
    failures = []
    for key, entry in sorted(TABLE["members"].items()):
        owner = key.partition(".")[0]
        if entry["role"] != "api" or owner not in instances:
            continue
        failure = _member_failure(instances[owner], key, entry)
        if failure is not None:
            failures.append(failure)
    assert not failures, "\n".join(failures)


def test_a_removed_member_names_its_fix() -> None:
    from ddpkit.lightning import Trainer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = Trainer(logger=False, enable_checkpointing=False)
    with pytest.raises(LightningRemovedAttributeError, match=r"Trainer\.reset_train_dataloader "
                       r"\(Lightning 1\.0–1\.9\).*reload_dataloaders_every_n_epochs=1"):  # fmt: skip
        trainer.reset_train_dataloader()
    assert not hasattr(trainer, "train_loop")  # an AttributeError: hasattr still answers
    with pytest.raises(AttributeError, match="'Trainer' object has no attribute 'not_a_1x_name'"):
        trainer.not_a_1x_name  # noqa: B018


def _hooks(status: str, owner: str) -> list[str]:
    return sorted(
        key.partition(".")[2]
        for key, entry in TABLE["members"].items()
        if key.startswith(owner + ".") and entry["role"] == "hook" and entry["status"] == status
    )


@pytest.mark.parametrize("name", _hooks("refused", "LightningModule"))
def test_a_refused_hook_is_refused_before_the_stage_starts(name: str, tmp_path: Path) -> None:
    from ddpkit.lightning import LightningModule, Trainer

    def hook(self: Any, *args: Any) -> None:
        raise AssertionError("never called")

    module = type("OneX", (LightningModule,), {name: hook})()
    note = TABLE["members"][f"LightningModule.{name}"]["note"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = Trainer(default_root_dir=tmp_path, logger=False, max_steps=1)
    with pytest.raises(MisconfigurationError, match=f"OneX.{name}: ") as raised:
        trainer.fit(module)
    assert note in str(raised.value)


@pytest.mark.parametrize("name", _hooks("out of scope", "LightningModule"))
def test_an_out_of_scope_hook_warns_why_it_never_runs(name: str, tmp_path: Path) -> None:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from ddpkit.errors import DDPKitDeprecationWarning
    from ddpkit.lightning import LightningModule, Trainer

    class OneX(LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return self.layer(batch[0]).sum()

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    setattr(OneX, name, lambda self, *args: None)
    trainer = Trainer(default_root_dir=tmp_path, logger=False, max_steps=1,
                      enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    with pytest.warns(DDPKitDeprecationWarning, match=f"OneX.{name}: .*never called"):
        trainer.fit(OneX(), DataLoader(TensorDataset(torch.ones(2, 2)), batch_size=1))
