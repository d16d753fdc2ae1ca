"""The optional dependencies: each imported by the module that needs it, when it needs it, and
a missing one told as the pip extra that installs it
(:class:`~parquet_bloom.errors.MissingExtraError`), never as a bare ImportError from deep inside
a call (docs/cli.md#errors). The public table and Spark modules check theirs at import.

The extras are those of pyproject.toml's ``[project.optional-dependencies]``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from parquet_bloom.errors import MissingExtraError

__all__ = ["EXTRAS", "require"]

# The top-level package -> the extra of parquet-bloom that installs it.
EXTRAS = {
    "deltalake": "delta",
    "pyiceberg": "iceberg",
    "hudi": "hudi",
    "cryptography": "encryption",
    "pyspark": "spark",
    "lz4": "clickhouse",
    "zstandard": "clickhouse",
    "fsspec": "fsspec",
    "s3fs": "s3",
    "gcsfs": "gcs",
    "adlfs": "azure",
    "aiohttp": "http",
}


def require(module: str, purpose: str, *, extra: str | None = None) -> ModuleType:
    """``module`` imported; if it cannot be, :class:`MissingExtraError` saying that ``purpose``
    needs its package and which extra installs it (``extra``: another than the package's own,
    as an fsspec URL of a protocol names the protocol's extra)."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        package = module.split(".")[0]
        raise MissingExtraError(
            purpose, package=package, extra=extra or EXTRAS.get(package, package)
        ) from err
