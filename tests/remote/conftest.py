"""The object-store tests: their fixtures are in tests/remote/fixtures.py (a plugin of the root
conftest, so that tests/tables has them too)."""

from __future__ import annotations

import pytest

from tests.remote.fixtures import clear_filesystem_caches


@pytest.fixture(autouse=True)
def _fresh_filesystems() -> None:
    """Every test here starts without cached fsspec filesystem instances."""
    clear_filesystem_caches()
