"""The public API: what ``parquet_bloom`` exports, and what importing it costs."""

from __future__ import annotations

import importlib
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import parquet_bloom as pb

# Third-party packages the core may import; everything else loads when a feature needs it.
CORE_DEPENDENCIES = {"numpy", "xxhash", "thrift"}


def _imported_after(code: str) -> set[str]:
    """The top-level third-party packages a fresh interpreter has imported after ``code``."""
    script = (
        f"{code}\n"
        "import json, sys\n"
        "names = {m.split('.')[0] for m in sys.modules}\n"
        "print(json.dumps(sorted(names - set(sys.stdlib_module_names))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    # Leading underscores: __main__, the interpreter's own helpers (_sysconfigdata_*, ...).
    return {name for name in json.loads(done.stdout) if not name.startswith("_")} - {
        "parquet_bloom"
    }


def test_import_loads_no_pyarrow_pyspark_or_pandas() -> None:
    assert _imported_after("import parquet_bloom") <= CORE_DEPENDENCIES


def test_filters_and_the_reader_need_only_the_core_dependencies(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), path, bloom_filter_options={"id": True})
    code = (
        "import parquet_bloom as pb\n"
        "f = pb.SplitBlockBloomFilter.from_ndv(1000)\n"
        "f.insert([1, 2, 3], 'INT64')\n"
        "assert f.might_contain(2, 'INT64')\n"
        f"with pb.BloomFilterReader({str(path)!r}) as reader:\n"
        "    assert reader.row_groups_might_contain('id', [2]) == [0]\n"
    )
    assert _imported_after(code) <= CORE_DEPENDENCIES


def test_pruning_loads_pyarrow_when_first_used() -> None:
    loaded = _imported_after("import parquet_bloom as pb\npb.prune")
    assert "pyarrow" in loaded
    assert "pyspark" not in loaded


def test_every_exported_name_resolves() -> None:
    assert len(set(pb.__all__)) == len(pb.__all__)
    for name in pb.__all__:
        assert getattr(pb, name) is not None, name
    assert set(pb.__all__) <= set(dir(pb))
    namespace: dict[str, object] = {}
    exec("from parquet_bloom import *", namespace)
    assert set(pb.__all__) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'SplitBlockFilter'"):
        pb.SplitBlockFilter  # noqa: B018


@pytest.mark.parametrize(
    "module",
    [
        "parquet_bloom",
        "parquet_bloom.errors",
        "parquet_bloom.testing",
        "parquet_bloom.spark",
        "parquet_bloom.kernels",
        "parquet_bloom.iceberg",
        "parquet_bloom.delta",
    ],
)
def test_docs_api_names_every_export(module: str) -> None:
    api = (Path(__file__).parents[1] / "docs" / "api.md").read_text()
    exported = importlib.import_module(module).__all__
    assert [name for name in exported if f"`{name}" not in api] == []


def test_a_pickled_filter_names_the_public_class_only() -> None:
    # Pickles outlive a release: they must not name the private module the class lives in.
    f = pb.SplitBlockBloomFilter.from_ndv(100)
    f.insert([1, 2, 3], "INT64")
    data = pickle.dumps(f)
    assert b"_sbbf" not in data and b"parquet_bloom" in data
    assert pickle.loads(data).to_bytes() == f.to_bytes()
    assert repr(pb.SplitBlockBloomFilter).startswith("<class 'parquet_bloom.SplitBlockBloomFilter")
