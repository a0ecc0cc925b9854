"""What Lightning 1.4.9's ``tests/conftest.py`` gave its tests, for the ported 1.x tests here
(NOTICE.md): each test runs in a folder of its own (1.4 ran from the repository root, where a
Trainer without ``default_root_dir`` writes its logs; this suite refuses litter there), with the
environment restored after it (1.4's ``restore_env_variables``: ``seed_everything`` exports
``PL_GLOBAL_SEED``), and with ddpkit's warnings as warnings, not errors: the suite's
``filterwarnings`` makes them errors, but a 1.x test spells 1.x on purpose (``BoringModel``'s
``training_epoch_end``, ``checkpoint_callback=``, ``progress_bar_refresh_rate=`` ...) and each
such spelling warns with its 2.x form; the tests that check a warning still catch it with
``pytest.warns``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.filterwarnings("ignore::ddpkit.errors.DDPKitWarning"))


@pytest.fixture(autouse=True)
def _in_a_folder_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _restore_env_variables() -> Iterator[None]:
    env_backup = os.environ.copy()
    yield
    os.environ.clear()
    os.environ.update(env_backup)
