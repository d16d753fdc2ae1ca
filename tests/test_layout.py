"""The layout docs/architecture.md describes, held: private by default, no reaching into another
module's private names, no module too long to read."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "parquet_bloom"
GENERATED = SRC / "_thrift"
# Modules a user may import: the API (docs/api.md), the command and its entry point.
PUBLIC = {
    "parquet_bloom",
    "parquet_bloom.errors",
    "parquet_bloom.kernels",
    "parquet_bloom.testing",
    "parquet_bloom.cli",
    "parquet_bloom.__main__",
    "parquet_bloom.spark",
    "parquet_bloom.hudi",
    "parquet_bloom.iceberg",
    "parquet_bloom.delta",
    "parquet_bloom.paimon",
    "parquet_bloom.clickhouse",
    "parquet_bloom.index",
}
MAX_LINES = 900


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        if GENERATED in path.parents:
            continue
        parts = ["parquet_bloom", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_private(module: str) -> bool:
    return any(part.startswith("_") and part != "__main__" for part in module.split(".")[1:])


def test_every_module_is_public_api_or_private() -> None:
    unexpected = [m for m in _modules() if not _is_private(m) and m not in PUBLIC]
    assert unexpected == []


def test_no_module_imports_another_modules_private_names() -> None:
    offences = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(), str(path))
        aliases = {}  # local name -> the parquet_bloom module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("parquet_bloom"):
                for name in node.names:
                    target = f"{node.module}.{name.name}"
                    if target in _modules() or target == "parquet_bloom._kernels":
                        aliases[name.asname or name.name] = target
                    elif name.name.startswith("_") and not name.name.startswith("__"):
                        offences.append(f"{module}: from {node.module} import {name.name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                offences.append(f"{module}: {node.value.id}.{node.attr}")
    assert offences == []


def test_no_module_is_over_the_length_limit() -> None:
    lengths = {m: len(p.read_text().splitlines()) for m, p in _modules().items()}
    assert {m: n for m, n in lengths.items() if n > MAX_LINES} == {}
