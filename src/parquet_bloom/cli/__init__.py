"""The ``parquet-bloom`` command: inspect, probe, check, add, resize and remove Bloom filters.

Every command prints a table for people by default and JSON with ``--json``. Bad input (a file
that is not Parquet, a truncated file, an unknown column, a value the column cannot hold) is one
line on stderr and exit status 2, never a traceback. With several files, a progress bar goes to
stderr when stderr is a terminal or ``--progress`` is given.

Exit status: 0 success; 1 ``probe`` found every row group excluded, or ``check`` found a
violation; 2 bad input or usage, or a file that could not be read (a store's error, a reset, a
timeout, an object gone mid-run: never a violation, whatever read failed).
"""

from __future__ import annotations

from parquet_bloom.cli._main import main
from parquet_bloom.cli._output import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_FOUND_NOTHING,
    EXIT_INTERRUPTED,
    EXIT_OK,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_FOUND_NOTHING",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "main",
]
