"""Shared fixtures for the storage tests (no sockets; everything under tmp_path).

Helpers live in ``storage_helpers`` (a unique module name: the tests tree has several
``conftest.py`` files); ``FakeClock`` is re-exported here for tests that import it from conftest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.storage.storage_helpers import FakeClock, expected_indexes, index_file_entries

__all__ = ["FakeClock", "expected_indexes", "index_file_entries"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def log_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "topic-0"
