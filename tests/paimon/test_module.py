"""The public face of parquet_bloom.paimon: documented, cheap to import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from parquet_bloom import paimon


def test_docs_api_names_every_export() -> None:
    api = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    section = api.split("## `parquet_bloom.paimon`")[1].split("\n## ")[0]
    assert [name for name in paimon.__all__ if f"`{name}" not in section] == []


def test_every_export_resolves_and_names_this_module() -> None:
    for name in paimon.__all__:
        value = getattr(paimon, name)
        if isinstance(value, type):
            assert value.__module__ == "parquet_bloom.paimon", name


def test_importing_it_loads_the_core_dependencies_only() -> None:
    script = (
        "import json, sys\n"
        "from parquet_bloom import paimon\n"
        "f = paimon.build_bloom_filter(['a', 'b'], 'STRING', 10, 0.1)\n"
        "assert paimon.read_file_index(paimon.serialize_file_index("
        "{'s': {'bloom-filter': f.to_bytes()}})).might_contain('s', 'a')\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(done.stdout)) - set(sys.stdlib_module_names)
    assert {m for m in loaded if not m.startswith("_")} <= {
        "numpy",
        "xxhash",
        "thrift",
        "parquet_bloom",
    }
