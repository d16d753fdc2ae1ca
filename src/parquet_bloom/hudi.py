"""Hudi's record-key Bloom filters: read them from base files, probe keys, build them byte for
byte as Hudi does, and find which base files of a table may hold keys.

Every base file Hudi writes carries a Bloom filter of its record keys in the Parquet footer's
key-value metadata (``org.apache.hudi.bloomfilter``; older files ``com.uber.hoodie.bloomfilter``),
its type in ``hoodie_bloom_filter_type_code`` (absent: SIMPLE) and the file's smallest and
largest keys in ``hoodie_min_record_key`` / ``hoodie_max_record_key``. Hudi's bloom index reads
them on every upsert to find the files an incoming key may update. This is not a Parquet
split-block filter: it is Hadoop's Bloom filter (MurmurHash2, chained) as Hudi ported it, and
DYNAMIC_V0 is Hudi's bounded version of Hadoop's dynamic filter. docs/hudi.md describes the
format, with the sources of each fact.

::

    from parquet_bloom import hudi

    f = hudi.read_bloom_filter("table/2024/01/abc_0-1-2_20240101.parquet")
    f.type, f.num_hashes, f.vector_size, f.rows        # "DYNAMIC_V0", 30, 2587966, 1
    f.might_contain("key-17")                          # True / False
    f.might_contain_many(keys)                         # numpy bool array
    g = hudi.build_bloom_filter(keys)                  # DYNAMIC_V0, Hudi's defaults
    g.to_footer_value() == f.to_footer_value()         # byte-identical to Hudi's, same keys
    hudi.files_for_keys("table", ["key-17", "key-99"]) # {key: [base files that may hold it]}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._hudi import codec
from parquet_bloom._hudi.check import HudiCheckReport, check_file
from parquet_bloom._hudi.filter import (
    DEFAULT_FPP,
    DEFAULT_MAX_ENTRIES,
    DEFAULT_NUM_ENTRIES,
    FOOTER_KEY,
    LEGACY_FOOTER_KEY,
    MAX_RECORD_KEY_KEY,
    MIN_RECORD_KEY_KEY,
    TYPE_CODE_KEY,
    TYPES,
    FilterSize,
    HudiBloomFilter,
    filter_from_metadata,
    filter_size,
)
from parquet_bloom._hudi.footer import read_hudi_metadata
from parquet_bloom._hudi.keys import encode_keys
from parquet_bloom._hudi.murmur import hash_chains
from parquet_bloom._hudi.table import BaseFile, KeyLookup, lookup_keys

__all__ = [
    "DEFAULT_FPP",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_NUM_ENTRIES",
    "FOOTER_KEY",
    "LEGACY_FOOTER_KEY",
    "MAX_RECORD_KEY_KEY",
    "MIN_RECORD_KEY_KEY",
    "TYPES",
    "TYPE_CODE_KEY",
    "BaseFile",
    "FilterSize",
    "HudiBloomFilter",
    "HudiCheckReport",
    "KeyLookup",
    "build_bloom_filter",
    "check_file",
    "files_for_keys",
    "filter_from_metadata",
    "filter_size",
    "hash_keys",
    "lookup_keys",
    "read_bloom_filter",
    "read_footer_metadata",
]


def build_bloom_filter(
    keys: Any,
    type: str = codec.DYNAMIC_V0,
    num_entries: int = DEFAULT_NUM_ENTRIES,
    fpp: float = DEFAULT_FPP,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> HudiBloomFilter:
    """The filter Hudi writes for a file whose records have ``keys``, in order
    (BloomFilterFactory.createBloomFilter, then ``add`` of each key): ``type`` SIMPLE or
    DYNAMIC_V0, sized by :func:`filter_size` for ``num_entries`` at ``fpp``; DYNAMIC_V0 rows
    hold ``num_entries`` keys each and grow up to ``max_entries`` (then keys go round-robin).
    Its :meth:`~HudiBloomFilter.to_footer_value` is byte for byte Hudi's. The key range is
    set from the keys (Java's ``String.compareTo`` order, as Hudi's Avro writer keeps it)."""
    size = filter_size(num_entries, fpp)
    if size.num_bits < 1 or size.num_hashes < 1:
        raise ValueError(f"{num_entries} entries at fpp {fpp} give {size}: an empty filter")
    f = HudiBloomFilter(
        type,
        size.num_hashes,
        size.num_bits,
        keys_per_row=int(num_entries),
        max_entries=max_entries,
    )
    if not isinstance(keys, Sequence | np.ndarray) and not _is_arrow(keys):
        keys = list(keys)  # read twice: added, then the range
    f.add_many(keys)
    text = [k for k in _as_list(keys) if isinstance(k, str)]
    if text:
        f.min_record_key, f.max_record_key = _java_min_max(text)
    return f


_FROM_E000 = re.compile("[\ue000-\U0010ffff]")  # where UTF-16 and code point orders part


def _java_min_max(text: list[str]) -> tuple[str, str]:
    """The smallest and largest string by Java's ``String.compareTo`` (UTF-16 code units),
    which is code point order unless a string holds a character from U+E000 up."""
    if _FROM_E000.search("".join(text)) is None:
        return min(text), max(text)
    units = [s.encode("utf-16-be", "surrogatepass") for s in text]
    low = min(range(len(text)), key=units.__getitem__)
    high = max(range(len(text)), key=units.__getitem__)
    return text[low], text[high]


def _is_arrow(keys: Any) -> bool:
    return type(keys).__module__.startswith("pyarrow")


def _as_list(keys: Any) -> list[Any]:
    if _is_arrow(keys):
        import pyarrow as pa

        kind = keys.type
        if (
            pa.types.is_string(kind)
            or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind)
        ):
            return list(keys.to_pylist())
        return []
    if isinstance(keys, np.ndarray):
        return list(keys.ravel().tolist())
    return list(keys) if isinstance(keys, Iterable) else []


def read_footer_metadata(
    source: Any,
    *,
    filesystem: Any | None = None,
    storage_options: Mapping[str, Any] | None = None,
    size: int | None = None,
    tail_size: int | None = None,
) -> dict[str, str]:
    """The Hudi entries of a Parquet file's footer key-value metadata (the filter, its type
    code, the key range; those present), read with one footer read through the library's IO
    layer. ``source`` is a path, a URL or a binary file object, as for ``BloomFilterReader``."""
    return read_hudi_metadata(
        source,
        filesystem=filesystem,
        storage_options=storage_options,
        size=size,
        tail_size=tail_size,
    ).metadata


def read_bloom_filter(
    path: Any,
    storage_options: Mapping[str, Any] | None = None,
    *,
    filesystem: Any | None = None,
    size: int | None = None,
    tail_size: int | None = None,
) -> HudiBloomFilter | None:
    """The record-key filter of a Hudi base file (a path, a URL or a binary file object),
    with ``min_record_key`` / ``max_record_key`` set from the footer; None when the file
    carries none. One footer read. Raises CorruptFileError (located: the file) for a value
    that does not decode, UnsupportedFileError for a filter this library does not read."""
    found = read_hudi_metadata(
        path,
        filesystem=filesystem,
        storage_options=storage_options,
        size=size,
        tail_size=tail_size,
    )
    return filter_from_metadata(found.metadata, source=found.name)


def hash_keys(keys: Any, num_hashes: int) -> NDArray[np.int32]:
    """Each key's ``num_hashes`` chained MurmurHash2 values (Java ints), shape ``(keys,
    num_hashes)``: what :meth:`HudiBloomFilter.might_contain_hashes` tests. The positions in
    a filter are ``abs(h % vector_size)``, so one hashing serves every filter with that many
    hashes, whatever its size."""
    if not 0 <= num_hashes <= codec.MAX_NUM_HASHES:
        raise ValueError(f"num_hashes must be from 0 to {codec.MAX_NUM_HASHES}, not {num_hashes}")
    return hash_chains(encode_keys(keys), int(num_hashes))


def files_for_keys(
    table_uri: str,
    keys: Iterable[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    hudi_options: Mapping[str, str] | None = None,
    confirm: bool = False,
    max_workers: int = 16,
) -> dict[str, list[str]]:
    """For each record key, the base files of the table's latest file slices that may hold
    it, as Hudi's bloom index decides (HoodieBloomIndex, over all partitions: the global
    lookup): a file is a candidate when the key lies in its footer's key range and its
    record-key filter may contain it; a file without a range or filter is a candidate for
    every key, and so is a base file that is not Parquet (ORC, HFile or Lance, by the
    extension Hudi gives it: it has no Parquet footer, so no filter here to consult; it is
    not opened, and :func:`lookup_keys` counts it in ``files_not_parquet``). With
    ``confirm=True`` each Parquet candidate's ``_hoodie_record_key`` column is read and only
    files that hold the key are kept (HoodieKeyLookupHandle's check).

    The table's file slices come from the ``hudi`` package (hudi-rs; ``pip install
    'parquet-bloom[hudi]'``), opened with ``hudi_options``; the footers are read through
    this library's IO layer with ``storage_options`` (fsspec's, for URLs), one read each,
    concurrently. Paths are the table URI joined with each base file's relative path."""
    return lookup_keys(
        table_uri,
        keys,
        storage_options,
        hudi_options=hudi_options,
        confirm=confirm,
        max_workers=max_workers,
    ).files
