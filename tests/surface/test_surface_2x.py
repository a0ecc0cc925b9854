"""Lightning 2.x's public surface on ddpkit's own objects: every entry has one status, and every
status is what the code does.

- The committed table (``surface_2x.json``) and its page are what the rules give for the facts
  (``scripts/lightning_2x_table.py`` writes both); the facts are the installed Lightning's.
- *same*: ddpkit's class has the member (a method taking every call Lightning's takes, a
  property that reads and, where Lightning's can, sets) or the keyword with Lightning's default
  (building with it works); a hook ddpkit's base lacks is called when defined; a named
  comparison test exists.
- *refused* / *out of scope*: the member raises ``LightningOnlyAttributeError``, the keyword
  ``UnknownKeywordError`` (or, for one ddpkit has, a ``MisconfigurationError``), the class
  ``LightningOnlyImportError`` — each with the entry's note; a hook or setting the user defines
  is refused before any rank starts.
- *difference*: its row is in docs/flags.md's Differences table; setting a read-only one names it.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import ddpkit
from ddpkit._lightning_surface import build, load, page, rules
from ddpkit._lightning_surface.signatures import incompatible, unsettable
from ddpkit.errors import (
    LightningOnlyAttributeError,
    LightningOnlyImportError,
    MisconfigurationError,
    UnknownKeywordError,
)

try:  # imported at collection: Lightning's import sets an environment variable of torch's
    import pytorch_lightning as pl
except ImportError:  # pragma: no cover - the `lightning` extra is not installed
    pl = None

REPO = Path(__file__).resolve().parents[2]
SURFACE = REPO / "src" / "ddpkit" / "_lightning_surface"
FACTS = json.loads((SURFACE / "facts_2x.json").read_text())
TABLE = load()
LACKING = ("refused", "out of scope")


def _ours(owner: str) -> type:
    found = build.counterpart(owner, FACTS["classes"][owner])
    assert found is not None, owner
    return found


def _entries(section: str, *statuses: str) -> list[str]:
    return sorted(k for k, e in TABLE[section].items() if e["status"] in statuses)


def _has(owner: str) -> bool:
    return TABLE["classes"][owner]["status"] == "same"


def test_the_table_is_what_the_rules_give_for_the_facts() -> None:
    rebuilt = build.build_table(FACTS)
    assert build.dumps(rebuilt) == (SURFACE / "surface_2x.json").read_text(), (
        "surface_2x.json is stale: run .venv/bin/python scripts/lightning_2x_table.py"
    )
    assert page.render(rebuilt) == (REPO / "docs" / "lightning-2x-surface.md").read_text(), (
        "docs/lightning-2x-surface.md is stale: run .venv/bin/python scripts/lightning_2x_table.py"
    )


def test_the_facts_are_the_installed_lightnings() -> None:
    if pl is None:
        pytest.skip("the `lightning` extra is not installed")
    spec = importlib.util.spec_from_file_location(
        "surface_2x", REPO / "scripts/lightning_2x_surface.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        extracted = json.loads(json.dumps(script.extract()))
    assert extracted == FACTS, "facts_2x.json is stale: run scripts/lightning_2x_surface.py"


def test_every_fact_has_one_status_and_what_its_status_needs() -> None:
    facts = FACTS["classes"]
    assert set(TABLE["classes"]) == set(facts)
    assert len(TABLE["members"]) == sum(len(info["members"]) for info in facts.values())
    assert len(TABLE["keywords"]) == sum(len(info.get("keywords") or []) for info in facts.values())
    entries = [e for section in ("classes", "keywords", "members") for e in TABLE[section].values()]
    assert all(e["status"] in rules.STATUSES for e in entries)
    assert all("Fix:" in e["note"] for e in entries if e["status"] == "refused")
    assert all(e.get("note") for e in entries if e["status"] in LACKING)
    assert all(e.get("row") for e in entries if e["status"] == "difference")


def _differences() -> list[str]:
    text = (REPO / "docs" / "flags.md").read_text()
    section = text.split("## Differences from Lightning", 1)[1]
    return [line[2:] for line in section.splitlines() if line.startswith("| ") and " | " in line]


def test_every_difference_is_a_row_of_the_differences_table() -> None:
    rows = _differences()
    missing = {
        e["row"]
        for section in ("keywords", "members")
        for e in TABLE[section].values()
        if e["status"] == "difference" and not any(row.startswith(e["row"]) for row in rows)
    }
    assert not missing, f"no row of docs/flags.md's Differences table starts with {missing}"


def test_every_named_comparison_test_exists_and_every_rule_is_used() -> None:
    for test in rules.COMPARED:
        path, _, function = test.partition("::")
        source = (REPO / path).read_text()
        assert not function or f"def {function}(" in source, test
    keys = {*TABLE["members"], *TABLE["keywords"]}
    assert not [k for k in rules.RULES if k not in keys], "rules for names Lightning lacks"
    assert not [c for c in rules.CLASS_RULES if _has(c)], "class rules for what ddpkit has"
    for patterns in rules.COMPARED.values():
        for pattern in patterns:
            assert any(fnmatch.fnmatchcase(k, pattern) for k in keys), pattern
    equivalent = {k.partition("(")[0] for k in rules.EQUIVALENT_DEFAULTS}
    assert equivalent <= {k.partition("(")[0] for k in keys} | {k.rpartition(".")[0] for k in keys}


def _instance(owner: str) -> Any:
    return build.instance_of(owner, _ours(owner))


@pytest.mark.parametrize("key", _entries("members", "same"))
def test_a_same_member_is_there_alike(key: str) -> None:
    owner, _, name = key.partition(".")
    entry, ours, instance = TABLE["members"][key], _ours(owner), _instance(owner)
    if name in rules.CALLED_WHEN_DEFINED and not hasattr(ours, name):
        return  # test_a_hook_the_base_lacks_is_called_when_defined
    assert hasattr(ours, name) or name in vars(instance), key
    fact = FACTS["classes"][owner]["members"][name]
    if entry["kind"].endswith("method"):
        generic = all(p["kind"] in ("*args", "**kwargs") for p in fact["parameters"])
        excused = frozenset(p["name"] for p in fact["parameters"]
                            if f"{key}({p['name']})" in rules.EQUIVALENT_DEFAULTS)  # fmt: skip
        assert generic or incompatible(fact["parameters"], getattr(ours, name), excused) is None
    if entry["kind"] == "attribute" or entry.get("settable"):
        assert not unsettable(ours, instance, name), f"{key}: Lightning's can be set"


_REQUIRED = {"EarlyStopping": {"monitor": "loss"}, "CSVLogger": {}, "TensorBoardLogger": {}}


def _build(owner: str, tmp_path: Path, **kwargs: Any) -> Any:
    ours = _ours(owner)
    given = {**_REQUIRED.get(owner, {}), **kwargs}
    if "save_dir" in __import__("inspect").signature(ours).parameters:
        given.setdefault("save_dir", str(tmp_path))
    if owner == "Trainer":
        given = {"logger": False, "enable_progress_bar": False, **given}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ours(**given)


@pytest.mark.parametrize("key", _entries("keywords", "same"))
def test_a_same_keyword_takes_lightnings_default(key: str, tmp_path: Path) -> None:
    owner, _, name = key[:-1].partition("(")
    entry = TABLE["keywords"][key]
    if name.startswith("*") or "default" not in entry or owner in ("LightningModule",):
        return  # *args / **kwargs (compared by kind in the build), or a required keyword
    try:
        value = ast.literal_eval(entry["default"])
    except (ValueError, SyntaxError):  # an enum member: Lightning's Timer(interval=Interval.step)
        if "'" not in entry["default"]:
            return  # a function (BackboneFinetuning's lambda_func): compared by name in the build
        value = entry["default"].split("'")[1]
    _build(owner, tmp_path, **{name: value})


def test_an_equivalent_default_builds_the_same_trainer(tmp_path: Path) -> None:
    lightnings = _build("Trainer", tmp_path, devices="auto", accelerator="auto", strategy="auto")
    ddpkits = _build("Trainer", tmp_path)
    for attribute in ("num_devices", "world_size", "precision"):
        assert getattr(lightnings, attribute) == getattr(ddpkits, attribute)
    assert type(lightnings.strategy) is type(ddpkits.strategy)


@pytest.mark.parametrize(
    "key", [k for k in _entries("members", *LACKING) if _has(k.partition(".")[0])]
)
def test_a_lacking_member_raises_its_note(key: str) -> None:
    owner, _, name = key.partition(".")
    with pytest.raises(LightningOnlyAttributeError) as raised:
        getattr(_instance(owner), name)
    assert TABLE["members"][key]["note"] in str(raised.value)
    assert f".{name}: Lightning's {owner}.{name}" in str(raised.value)


@pytest.mark.parametrize("key", _entries("keywords", *LACKING))
def test_a_lacking_keyword_raises_its_note(key: str, tmp_path: Path) -> None:
    owner, _, name = key[:-1].partition("(")
    entry = TABLE["keywords"][key]
    if not _has(owner):
        return  # its class raises (test_a_lacking_class_raises_its_note)
    if entry.get("example"):
        with pytest.raises(MisconfigurationError, match=rf"^{owner}\({name}=.*Fix: "):
            _build(owner, tmp_path, **{name: ast.literal_eval(entry["example"])})
        return
    keyword = "theme" if name.startswith("**") else name
    with pytest.raises(UnknownKeywordError) as raised:
        _build(owner, tmp_path, **{keyword: 1})
    assert str(raised.value).startswith(f"{_ours(owner).__name__}({keyword}=1): ")
    assert entry["note"] in str(raised.value)


@pytest.mark.parametrize("owner", [c for c in sorted(TABLE["classes"]) if not _has(c)])
def test_a_lacking_class_raises_its_note(owner: str) -> None:
    package = TABLE["classes"][owner]["exported"].replace("pytorch_lightning", "ddpkit")
    with pytest.raises(LightningOnlyImportError) as raised:
        exec(f"from {package} import {owner}")
    assert TABLE["classes"][owner]["note"] in str(raised.value)


def test_a_missing_name_that_lightning_lacks_too_is_pythons_error() -> None:
    trainer = _build("Trainer", Path("."))
    with pytest.raises(
        AttributeError, match="'Trainer' object has no attribute 'not_a_name'"
    ) as raised:
        trainer.not_a_name  # noqa: B018
    assert not isinstance(raised.value, LightningOnlyAttributeError)
    with pytest.raises(UnknownKeywordError, match=r"ModelCheckpoint\(dirpth='x'\): .*'dirpath'"):
        ddpkit.callbacks.ModelCheckpoint(dirpth="x")
    with pytest.raises(AttributeError, match="has no attribute 'NotAClass'"):
        ddpkit.callbacks.NotAClass  # noqa: B018


def _settable(key: str) -> bool:
    entry = TABLE["members"][key]
    return entry["kind"] == "attribute" or bool(entry.get("settable"))


@pytest.mark.parametrize("key", [k for k in _entries("members", "difference") if _settable(k)])
def test_setting_a_read_only_difference_names_its_row(key: str, tmp_path: Path) -> None:
    name = key.partition(".")[2]
    with pytest.raises(LightningOnlyAttributeError, match=rf"^trainer\.{name} = 3: .*Differences"):
        setattr(_build("Trainer", tmp_path), name, 3)


def _loader() -> DataLoader[Any]:
    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=2)


class Net(ddpkit.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _trainer(tmp_path: Path, **kwargs: Any) -> ddpkit.Trainer:
    return ddpkit.Trainer(
        accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path, **kwargs,
    )  # fmt: skip


def test_a_hook_the_base_lacks_is_called_when_defined(tmp_path: Path) -> None:
    called: list[str] = []

    def hook(name: str) -> Any:
        def run(self: Any, *args: Any) -> Any:
            called.append(name)
            return _loader() if name.endswith("_dataloader") else None

        return run

    model = type("AllHooks", (Net,), {n: hook(n) for n in rules.CALLED_WHEN_DEFINED})()
    trainer = _trainer(tmp_path)
    for stage in ("fit", "validate", "test", "predict"):
        getattr(trainer, stage)(model)
    assert set(called) == set(rules.CALLED_WHEN_DEFINED)


def _defined(role: str, owner: str) -> list[str]:
    return sorted(k.partition(".")[2] for k in _entries("members", *LACKING)
                  if k.startswith(owner + ".") and TABLE["members"][k]["role"] == role)  # fmt: skip


def _never(self: Any, *args: Any) -> None:
    raise AssertionError("never called: refused before any rank starts")


@pytest.mark.parametrize(("owner", "name"), [
    *(("LightningModule", n) for n in _defined("hook", "LightningModule") + _defined("setting", "LightningModule")),
    *(("LightningDataModule", n) for n in _defined("hook", "LightningDataModule") + _defined("setting", "LightningDataModule")),
])  # fmt: skip
def test_a_lacking_hook_or_setting_defined_is_refused_before_any_rank_starts(
    owner: str, name: str, tmp_path: Path
) -> None:
    note = TABLE["members"][f"{owner}.{name}"]["note"]
    if owner == "LightningModule":
        model, data = type("Mine", (Net,), {name: _never})(), {"train_dataloaders": _loader()}
    else:
        hooks = {name: _never, "train_dataloader": lambda self: _loader()}
        model, data = Net(), {"datamodule": type("Mine", (ddpkit.DataModule,), hooks)()}
    trainer = _trainer(tmp_path)
    with pytest.raises(MisconfigurationError, match=rf"^Mine\.{name}: ") as raised:
        trainer.fit(model, **data)
    assert note in str(raised.value)


def test_a_setting_made_in_init_is_refused_too(tmp_path: Path) -> None:
    model = Net()
    model.strict_loading = False
    with pytest.raises(MisconfigurationError, match=r"^Net\.strict_loading: .*strict=False"):
        _trainer(tmp_path).fit(model, _loader())


def test_lightnings_own_callback_is_refused_with_ddpkits(tmp_path: Path) -> None:
    if pl is None:
        pytest.skip("the `lightning` extra is not installed")
    trainer = _trainer(tmp_path, callbacks=[pl.callbacks.ModelCheckpoint()])
    with pytest.raises(
        MisconfigurationError, match=r"from ddpkit.callbacks import ModelCheckpoint"
    ):
        trainer.fit(Net(), _loader())
    trainer = _trainer(tmp_path, callbacks=[pl.callbacks.LambdaCallback()])
    with pytest.raises(MisconfigurationError, match=r"subclass ddpkit.callbacks.Callback"):
        trainer.fit(Net(), _loader())
