"""Which implementation hashes values and inserts them: compiled loops, or numpy alone.

The numpy code in :mod:`parquet_bloom._xxh64`, :mod:`parquet_bloom._pages` and
:mod:`parquet_bloom._sbbf` is complete by itself: it is the reference, it runs wherever numpy
does, and every test runs on it. Where the package was installed with a C compiler at hand, it
also carries ``_kernels``, a small C extension (``_kernels.c``) with the loops that dominate
building and probing filters: XXH64 of fixed-width rows, of byte spans and of the PLAIN strings
of a page where they lie (short ones eight at a time with AVX-512), setting a hash's eight bits
in its block, and testing them (with AVX2), where the CPU has those instructions; and the
decompression of Snappy pages (docs/format-notes.md#snappy) into one reused buffer, where numpy
alone has pyarrow decompress each into a new one. They do in one pass per value what numpy
does in a dozen passes per step (or Python in a loop), and they release the GIL, so the
threads that build or probe filters run in parallel (the pattern of msgpack's ``_cmsgpack``
and pyiceberg's Cython decoder, each with a pure-Python fallback).

With ``_kernels_probe.c`` it also answers a point lookup of one local Parquet file in one call
(:mod:`parquet_bloom._prune.local_probe`): the tail read, the footer walked to the probed
columns' chunks, each filter's header and blocks read, the hashes tested, without the GIL, so
that two threads prune two files at once; a file it does not take is the Python path's.

The extension also chains Hadoop's MurmurHash2 over record keys for Hudi's filters
(:mod:`parquet_bloom._hudi.murmur`), the loop that hashes keys for probing and building them;
and, on Linux, runs the loop of a rewrite's copy through a pipe (``splice_copy``, used by
:mod:`parquet_bloom._io.sink`) without the GIL, so that the disk gets its next write while
other threads run Python.

``compiled`` is that extension module, or None when numpy does the work:

- the extension was not built (no compiler at install time, a zipped package on a Spark
  executor), or
- the environment variable ``PARQUET_BLOOM_PURE_PYTHON`` is set to anything but ``""`` or
  ``"0"`` when this module is imported, or
- the machine is big-endian (the loops read little-endian words in place).

Results are bit for bit the same either way; the tests run both.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from numpy.typing import NDArray

# What the kernels read through the buffer protocol; the callers pass numpy arrays (numpy's
# stubs declare no __buffer__ before Python 3.12, so typing_extensions.Buffer would not match).
Buffer: TypeAlias = "NDArray[Any] | bytes | bytearray | memoryview"

__all__ = ["PURE_PYTHON_VARIABLE", "Kernels", "compiled"]

PURE_PYTHON_VARIABLE = "PARQUET_BLOOM_PURE_PYTHON"


class Kernels(Protocol):
    """The compiled loops (``_kernels.c``), as their callers use them; the extension module
    satisfies this protocol, so mypy checks every call against ``_kernels.pyi``.

    Each raises ValueError, before touching memory, when a span, row or hash would reach past
    its buffer.
    """

    def xxh64_rows(
        self, data: Buffer, offset: int, stride: int, width: int, count: int, out: Buffer, /
    ) -> None:
        """XXH64 of ``count`` rows of ``width`` bytes, ``stride`` apart from ``offset``."""

    def xxh64_spans(self, data: Buffer, starts: Buffer, lengths: Buffer, out: Buffer, /) -> None:
        """XXH64 of ``data[starts[i] : starts[i] + lengths[i]]`` (int64 starts and lengths)."""

    def xxh64_byte_arrays(self, data: Buffer, count: int, out: Buffer, /) -> int:
        """XXH64 of the ``count`` PLAIN byte arrays at the start of ``data`` (each behind its
        4-byte length); returns the bytes they took."""

    def rle_scan(
        self, data: Buffer, bit_width: int, count: int, marks: Buffer, target: int, /
    ) -> tuple[int, int, int]:
        """One pass over the first ``count`` values of an RLE / bit-packed hybrid stream:
        ``marks[v] = 1`` for each value ``v`` (unless ``marks`` is empty) and the count of
        values equal to ``target``. Returns ``(0, newly marked, count)``, or a nonzero status
        for a stream that does not parse or a value outside ``marks`` (see ``_kernels.c``)."""

    def snappy_decompress(self, data: Buffer, out: Buffer, length: int, /) -> None:
        """Decompress the raw Snappy block ``data``, which must hold ``length`` bytes, into
        ``out[:length]`` (``out`` may be longer: the rest is scratch, which lets the copies
        move 8 or 16 bytes at a time up to the end). A block that does not decode to exactly
        that raises ValueError, perhaps with ``out`` partly written."""

    def insert(self, words: Buffer, hashes: Buffer, /) -> None:
        """Set each hash's eight bits in a split-block filter's words."""

    def find(self, words: Buffer, hashes: Buffer, out: Buffer, /) -> None:
        """``out[i]`` = whether all eight bits of ``hashes[i]`` are set in a split-block
        filter's words (one byte a hash: a numpy bool array of the hashes' length)."""

    def hudi_hashes(self, data: Buffer, offsets: Buffer, num_hashes: int, out: Buffer, /) -> None:
        """Hudi's record-key hashes: for key ``i`` = ``data[offsets[i] : offsets[i + 1]]``
        (int64 offsets, one more than the keys), its ``num_hashes`` chained MurmurHash2 values
        as Java ints into ``out`` (int32, ``num_hashes`` a key)."""

    def probe_local_file(
        self,
        path: str | bytes | os.PathLike[str],
        size: int,
        tail_size: int,
        key: Buffer,
        paths: Buffer,
        path_offsets: Buffer,
        types: Buffer,
        probe_leaves: Buffer,
        hash_counts: Buffer,
        hashes: Buffer,
        row_groups: Buffer,
        /,
    ) -> tuple[Any, ...]:
        """The point lookup of one local file (``_kernels_probe.c``): tail, footer, filter
        headers and blocks read, hashes probed, without the GIL. Its arguments and answers
        are :mod:`parquet_bloom._prune.local_probe`'s."""

    def probe_local_files(
        self,
        paths: list[str],
        sizes: Buffer,
        tail_size: int,
        key: Buffer,
        paths_in_schema: Buffer,
        path_offsets: Buffer,
        types: Buffer,
        probe_leaves: Buffer,
        hash_counts: Buffer,
        hashes: Buffer,
        threads: int,
        /,
    ) -> list[tuple[Any, ...]]:
        """:meth:`probe_local_file` of every row group of many files, on ``threads`` threads
        of its own, in one call."""


def _load() -> Kernels | None:
    if os.environ.get(PURE_PYTHON_VARIABLE, "") not in ("", "0") or sys.byteorder != "little":
        return None
    try:
        from parquet_bloom import _kernels
    except ImportError:
        return None
    return _kernels


compiled: Kernels | None = _load()
