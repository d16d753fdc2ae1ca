"""Which base files of a Hudi table may hold given record keys: Hudi's bloom index lookup.

Hudi's bloom index (HoodieBloomIndex and its helpers; docs/hudi.md#key-lookup) takes the latest
base file of each file group, keeps for an incoming key the files whose footer key range holds
the key (``BloomIndexFileInfo.isKeyInRange``; a file without a range is kept), then those whose
record-key filter may contain it, and finally reads the remaining files' keys to confirm
(HoodieKeyLookupHandle). :func:`lookup_keys` does the same over all partitions (the global index's
view: the keys carry no partition).

The file listing comes from the ``hudi`` package (hudi-rs): the latest file slices of a
snapshot, with each base file's relative path and size, so no listing or size lookup of our
own is made. Footers are read through the library's IO layer, one read each (two for a local
file whose ~430 KB footer exceeds the 64 KiB tail), concurrently.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parquet_bloom._hudi.filter import filter_from_metadata
from parquet_bloom._hudi.footer import read_hudi_metadata
from parquet_bloom._hudi.keys import encode_keys
from parquet_bloom._hudi.murmur import hash_chains
from parquet_bloom._io import location

__all__ = [
    "NOT_PARQUET_FORMATS",
    "RECORD_KEY_COLUMN",
    "BaseFile",
    "KeyLookup",
    "base_file_format",
    "base_files",
    "lookup_keys",
]

RECORD_KEY_COLUMN = "_hoodie_record_key"  # HoodieRecord.RECORD_KEY_METADATA_FIELD
# HoodieFileFormat's base file formats by their extension (its BASE_FILE_EXTENSIONS: every
# format but HOODIE_LOG's ".log"). A table may mix them (Hudi 1.0's
# hoodie.table.multiple.base.file.formats.enable), and a table may use one other than Parquet
# (hoodie.table.base.file.format; Lance since Hudi 1.1). Only Parquet's footer is read here:
# the others keep their filter, if any, in their own format's metadata.
BASE_FILE_FORMATS = {".parquet": "PARQUET", ".orc": "ORC", ".hfile": "HFILE", ".lance": "LANCE"}
NOT_PARQUET_FORMATS = frozenset(BASE_FILE_FORMATS.values()) - {"PARQUET"}
# Hash chains kept for all keys at once, shared by every file with the same hash count, up to
# this many int32 values (64 MiB); more keys are hashed again for each file.
_MAX_SHARED_HASHES = 1 << 24


def base_file_format(path: str) -> str | None:
    """Hudi's name of a base file's format (``"PARQUET"``, ``"ORC"``, ``"HFILE"``,
    ``"LANCE"``), from its extension as Hudi takes it (``FSUtils.getFileExtension``: the file
    name from its last ``.``, compared exactly, as ``HoodieFileFormat.fromFileExtension``
    does); None for an extension Hudi does not know."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return None if dot < 0 else BASE_FILE_FORMATS.get(name[dot:])


@dataclass(frozen=True)
class BaseFile:
    """A latest file slice's base file: where it is, its size, its partition and file group."""

    path: str
    size: int | None
    partition: str
    file_id: str

    @property
    def format(self) -> str | None:
        """Hudi's name of its format, from its extension (:func:`base_file_format`)."""
        return base_file_format(self.path)

    @property
    def is_parquet(self) -> bool:
        """False for a base file Hudi names as ORC, HFile or Lance: it has no Parquet footer,
        so no filter here to consult. A name Hudi does not know is read as Parquet."""
        return self.format not in NOT_PARQUET_FORMATS


@dataclass
class KeyLookup:
    """What :func:`lookup_keys` found: ``files`` maps each key to the base files that may hold it
    (in listing order; empty when none may); the counts say how the files were narrowed.

    ``base_files``: the latest base files considered; ``files_without_filter``: the Parquet
    ones with no record-key filter (a candidate for every key in range); ``files_not_parquet``:
    the base files that are not Parquet (ORC, HFile or Lance, by the extension Hudi gives them),
    each with its format's name: nothing here reads their filters, so they are candidates for
    every key, never opened, and not confirmed; ``pairs``: key-file pairs
    considered, ``pruned_by_range`` and ``pruned_by_filter`` those excluded by the key range
    and by the filter, ``confirmed_absent`` those the filter passed but the file's keys do not
    hold (with ``confirm``: the filter's false positives); ``requests`` and ``bytes_read``:
    the reads of footers (and, with ``confirm``, of key columns through this library)."""

    files: dict[str, list[str]]
    base_files: list[BaseFile]
    files_without_filter: list[str] = field(default_factory=list)
    files_not_parquet: dict[str, str] = field(default_factory=dict)
    pairs: int = 0
    pruned_by_range: int = 0
    pruned_by_filter: int = 0
    confirmed: bool = False
    confirmed_absent: int = 0
    requests: int = 0
    bytes_read: int = 0

    def __str__(self) -> str:
        keys = len(self.files)
        found = sum(1 for paths in self.files.values() if paths)
        lines = [
            f"{keys:,} keys over {len(self.base_files):,} base files: {found:,} keys with a "
            f"candidate file; of {self.pairs:,} key-file pairs, {self.pruned_by_range:,} pruned "
            f"by key range, {self.pruned_by_filter:,} by filter"
            + (f", {self.confirmed_absent:,} absent on reading the keys" if self.confirmed else "")
        ]
        if self.files_without_filter:
            lines.append(
                f"{len(self.files_without_filter):,} Parquet base files without a record-key "
                "filter: candidates for every key in their range"
            )
        if self.files_not_parquet:
            counts: dict[str, int] = {}
            for kind in self.files_not_parquet.values():
                counts[kind] = counts.get(kind, 0) + 1
            kinds = ", ".join(f"{n:,} {kind}" for kind, n in sorted(counts.items()))
            lines.append(
                f"{len(self.files_not_parquet):,} base files not Parquet ({kinds}): candidates "
                "for every key, not opened (no Parquet footer, so no filter here to consult)"
            )
        lines.append(f"{self.requests:,} requests, {self.bytes_read:,} bytes read")
        return "\n".join(lines)


def _join(table_uri: str, relative: str) -> str:
    if location.is_url(table_uri):
        return table_uri.rstrip("/") + "/" + relative
    return os.path.join(table_uri, *relative.split("/"))


def base_files(table_uri: str, hudi_options: Mapping[str, str] | None = None) -> list[BaseFile]:
    """The base files of the table's latest file slices (a snapshot at the latest commit),
    from the ``hudi`` package."""
    try:
        import hudi
    except ImportError as e:  # pragma: no cover - the extra is a test dependency
        raise ImportError(
            "a Hudi table's file listing needs the hudi package: pip install 'parquet-bloom[hudi]'"
        ) from e
    uri = table_uri if location.is_url(table_uri) else os.path.abspath(table_uri)
    table = hudi.HudiTable(uri, dict(hudi_options or {}))
    found = []
    for piece in table.get_file_slices():
        relative = piece.base_file_relative_path()
        if not relative:
            continue  # a file group with log files only (merge-on-read): no base file
        size = int(piece.base_file_size) if piece.base_file_size else None
        found.append(
            BaseFile(_join(table_uri, relative), size, piece.partition_path, piece.file_id)
        )
    return found


class _Keys:
    """The keys looked up, sorted both ways a key range may have been collected, with their
    hash chains shared between files of one hash count when they fit."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.by_point = sorted(range(len(keys)), key=keys.__getitem__)
        self.point_sorted = [keys[i] for i in self.by_point]
        units = [k.encode("utf-16-be", "surrogatepass") for k in keys]
        self.by_unit = sorted(range(len(keys)), key=units.__getitem__)
        self.unit_sorted = [units[i] for i in self.by_unit]
        self.buffer = encode_keys(keys)
        self._chains: dict[int, NDArray[np.int32]] = {}

    def in_range(self, low: str | None, high: str | None) -> NDArray[np.int64]:
        """Indices of the keys inside ``[low, high]`` by code points or by UTF-16 code units
        (all keys without a range)."""
        if low is None or high is None:
            return np.arange(len(self.keys), dtype=np.int64)
        a = bisect.bisect_left(self.point_sorted, low)
        b = bisect.bisect_right(self.point_sorted, high)
        lo, hi = (s.encode("utf-16-be", "surrogatepass") for s in (low, high))
        c = bisect.bisect_left(self.unit_sorted, lo)
        d = bisect.bisect_right(self.unit_sorted, hi)
        inside = set(self.by_point[a:b]) | set(self.by_unit[c:d])
        return np.array(sorted(inside), dtype=np.int64)

    def chains(self, num_hashes: int, which: NDArray[np.int64]) -> NDArray[np.int32]:
        if len(self.keys) * num_hashes > _MAX_SHARED_HASHES:
            return hash_chains(encode_keys([self.keys[i] for i in which]), num_hashes)
        if num_hashes not in self._chains:  # racing threads compute the same array: harmless
            self._chains[num_hashes] = hash_chains(self.buffer, num_hashes)
        return self._chains[num_hashes][which]


@dataclass
class _FileResult:
    base: BaseFile
    candidates: NDArray[np.int64]
    in_range: int
    has_filter: bool
    requests: int
    bytes_read: int
    absent: int = 0


def _probe_file(base: BaseFile, keys: _Keys, storage_options: Any) -> _FileResult:
    footer = read_hudi_metadata(base.path, storage_options=storage_options, size=base.size)
    found = filter_from_metadata(footer.metadata, source=footer.name)
    meta = footer.metadata
    inside = keys.in_range(meta.get("hoodie_min_record_key"), meta.get("hoodie_max_record_key"))
    candidates = inside
    if found is not None and len(inside):
        candidates = inside[found.might_contain_hashes(keys.chains(found.num_hashes, inside))]
    return _FileResult(
        base, candidates, len(inside), found is not None, footer.requests, footer.bytes_read
    )


def _confirm(result: _FileResult, keys: _Keys, storage_options: Any) -> None:
    """Keep the candidates the file's record keys hold."""
    if not len(result.candidates):
        return
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from parquet_bloom._io.source import ByteSource

    with ByteSource(
        result.base.path, storage_options=storage_options, size=result.base.size
    ) as source:
        column = pq.read_table(source.arrow_file(), columns=[RECORD_KEY_COLUMN]).column(0)
        wanted = pa.array([keys.keys[i] for i in result.candidates], type=pa.string())
        held = pc.is_in(wanted, value_set=column.combine_chunks().cast(pa.string()))
        keep = np.asarray(held.to_numpy(zero_copy_only=False), dtype=bool)
        result.requests += source.requests
        result.bytes_read += source.bytes_read
    result.absent = int((~keep).sum())
    result.candidates = result.candidates[keep]


def lookup_keys(
    table_uri: str,
    keys: Iterable[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    hudi_options: Mapping[str, str] | None = None,
    confirm: bool = False,
    max_workers: int = 16,
) -> KeyLookup:
    """:func:`files_for_keys` with what it cost and what it skipped: a
    :class:`KeyLookup`."""
    if isinstance(keys, str | bytes):
        raise TypeError("keys must be a collection of record keys, not one string")
    unique = list(dict.fromkeys(keys))
    for k in unique:
        if not isinstance(k, str):
            raise TypeError(f"a record key is a str, not {type(k).__name__}")
    if max_workers < 1:
        raise ValueError(f"max_workers must be >= 1, not {max_workers}")
    files = base_files(table_uri, hudi_options)
    wanted = _Keys(unique)
    options = dict(storage_options) if storage_options is not None else None

    def probe(base: BaseFile) -> _FileResult:
        if not base.is_parquet:
            everything = np.arange(len(unique), dtype=np.int64)
            return _FileResult(base, everything, len(unique), False, 0, 0)
        result = _probe_file(base, wanted, options)
        if confirm:
            _confirm(result, wanted, options)
        return result

    if files and unique:
        with ThreadPoolExecutor(max_workers=min(max_workers, len(files))) as pool:
            results = list(pool.map(probe, files))
    else:
        results = []
    report = KeyLookup({k: [] for k in unique}, files, confirmed=confirm)
    for r in results:
        report.pairs += len(unique)
        report.pruned_by_range += len(unique) - r.in_range
        report.pruned_by_filter += r.in_range - len(r.candidates) - r.absent
        report.confirmed_absent += r.absent
        report.requests += r.requests
        report.bytes_read += r.bytes_read
        if not r.base.is_parquet:
            report.files_not_parquet[r.base.path] = r.base.format or ""
        elif not r.has_filter:
            report.files_without_filter.append(r.base.path)
        for i in r.candidates.tolist():
            report.files[unique[i]].append(r.base.path)
    return report
