"""The public module: its names documented in docs/api.md, and what importing it costs."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from parquet_bloom import hudi


def test_docs_api_names_every_export() -> None:
    api = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    exported = importlib.import_module("parquet_bloom.hudi").__all__
    assert [name for name in exported if f"`{name}" not in api] == []
    assert set(exported) <= set(dir(hudi))


def test_importing_it_loads_no_pyarrow_nor_hudi() -> None:
    script = (
        "import json, sys\nfrom parquet_bloom import hudi\n"
        "names = {m.split('.')[0] for m in sys.modules}\n"
        "print(json.dumps(sorted(names - set(sys.stdlib_module_names))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert not loaded & {"pyarrow", "hudi", "fsspec", "pandas", "pyspark"}
