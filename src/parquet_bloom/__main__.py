"""``python -m parquet_bloom``: the ``parquet-bloom`` command."""

from __future__ import annotations

import sys

from parquet_bloom.cli import main

if __name__ == "__main__":
    sys.exit(main())
