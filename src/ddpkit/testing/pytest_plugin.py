"""ddpkit's pytest plugin: hooks only; the work lives in ddpkit.testing's modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ddpkit.testing.isolation import destroy_process_group_if_any


@pytest.fixture(autouse=True)
def _ddpkit_destroy_process_group() -> Iterator[None]:
    yield
    destroy_process_group_if_any()
