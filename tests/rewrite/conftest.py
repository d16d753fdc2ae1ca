"""The source files every rewrite test module reads, written once per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rewrite.files import write_sources


@pytest.fixture(scope="session")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_sources(tmp_path_factory.mktemp("sources"))
