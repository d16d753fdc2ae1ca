"""Checking a Hudi base file's record-key filter against the file's own keys.

A base file's ``_hoodie_record_key`` column holds the keys its filter was built from, in the
order they were added. The check reads them (through the library's IO layer, with pyarrow)
and reports:

- false negatives: keys of the file its filter says are absent (Hudi's bloom index would then
  send an update of that key to a new file: a duplicate);
- keys outside the footer's key range (the index's range check would skip the file for them);
- whether the filter rebuilt from those keys, with the file's own parameters (hash count,
  bits, keys per row, and a bound that gives its row count), is the file's byte for byte;
- the header's key count against the keys read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from parquet_bloom._hudi.filter import HudiBloomFilter, filter_from_metadata
from parquet_bloom._hudi.footer import read_hudi_metadata
from parquet_bloom._hudi.table import RECORD_KEY_COLUMN
from parquet_bloom._io.source import ByteSource
from parquet_bloom.errors import BloomFilterError

__all__ = ["HudiCheckReport", "check_file", "check_keys", "unreadable_filter"]


@dataclass
class HudiCheckReport:
    """What :func:`check_file` found in one base file. ``filter``: the filter's description
    (:meth:`~parquet_bloom.hudi.HudiBloomFilter.describe`), None when the file has none;
    ``num_keys``: record keys read (None without a ``_hoodie_record_key`` column); ``missing``
    and ``first_missing``: the false negatives; ``outside_range``: keys outside the footer's
    key range; ``exact``: whether the rebuilt filter is the file's byte for byte;
    ``violations`` (the file's filter would make Hudi's index wrong) and ``notes``."""

    path: str
    filter: dict[str, Any] | None = None
    num_rows: int = 0
    num_keys: int | None = None
    missing: int = 0
    first_missing: str | None = None
    outside_range: int = 0
    exact: bool | None = None
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    requests: int = 0
    bytes_read: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["requests"], out["bytes_read"]
        out["ok"] = self.ok
        return out


def _read_keys(
    path: Any, storage_options: Any, size: int | None
) -> tuple[list[Any] | None, int, int]:
    """The file's record keys in order (None without the column), and the read's cost."""
    import pyarrow.parquet as pq

    with ByteSource(path, storage_options=storage_options, size=size) as source:
        parquet = pq.ParquetFile(source.arrow_file())
        if RECORD_KEY_COLUMN not in parquet.schema_arrow.names:
            return None, source.requests, source.bytes_read
        column = parquet.read(columns=[RECORD_KEY_COLUMN]).column(0)
        return column.to_pylist(), source.requests, source.bytes_read


def check_file(
    path: Any,
    storage_options: Mapping[str, Any] | None = None,
    *,
    size: int | None = None,
    tail_size: int | None = None,
) -> HudiCheckReport:
    """Check the record-key filter of one base file against its ``_hoodie_record_key``
    column. A file without a Hudi filter gives a report with ``filter=None`` and no
    violation; a filter that does not decode is a violation."""
    options = dict(storage_options) if storage_options is not None else None
    footer = read_hudi_metadata(path, storage_options=options, size=size, tail_size=tail_size)
    report = HudiCheckReport(
        footer.name,
        num_rows=footer.num_rows,
        requests=footer.requests,
        bytes_read=footer.bytes_read,
    )
    try:
        found = filter_from_metadata(footer.metadata, source=footer.name)
    except BloomFilterError as e:
        report.violations.append(unreadable_filter(e))
        return report
    if found is None:
        report.notes.append("no Hudi record-key filter in the footer")
        return report
    report.filter = found.describe()
    keys, requests, bytes_read = _read_keys(path, options, size)
    report.requests += requests
    report.bytes_read += bytes_read
    if keys is None:
        report.notes.append(f"no {RECORD_KEY_COLUMN} column: the keys are not checked")
        return report
    check_keys(found, keys, report)
    return report


def unreadable_filter(error: BloomFilterError) -> str:
    """The violation of a filter that does not decode: the reason and where in the decoded
    value (the report names the file)."""
    where = "" if error.offset is None else f" (offset {error.offset})"
    return f"filter: the record-key filter cannot be read: {error.reason}{where}"


def check_keys(found: HudiBloomFilter, keys: list[Any], report: HudiCheckReport) -> None:
    """Check the file's filter ``found`` against the file's record ``keys`` (in the order they
    were written), into ``report``: the keys read, null or empty keys, false negatives, keys
    outside the footer's key range, whether the filter rebuilt from the keys is the file's byte
    for byte, and the header's key count against the keys."""
    report.num_keys = len(keys)
    if any(k is None or k == "" for k in keys):
        report.violations.append(f"keys: {RECORD_KEY_COLUMN} holds null or empty keys")
        keys = [k for k in keys if k]
    hits = found.might_contain_many(keys)
    report.missing = int((~hits).sum())
    if report.missing:
        report.first_missing = str(keys[int((~hits).argmax())])
        report.violations.append(
            f"false-negative: {report.missing} of {len(keys)} keys are not in the filter "
            f"(first: {report.first_missing!r})"
        )
    if found.min_record_key is None or found.max_record_key is None:
        report.notes.append("no key range in the footer: every key is looked up in this file")
    else:
        report.outside_range = sum(not found.key_in_range(str(k)) for k in keys)
        if report.outside_range:
            report.violations.append(
                f"range: {report.outside_range} keys lie outside the footer's key range "
                f"[{found.min_record_key!r}, {found.max_record_key!r}]"
            )
    rebuilt = HudiBloomFilter(
        found.type,
        found.num_hashes,
        found.vector_size,
        keys_per_row=found.keys_per_row,
        max_entries=None if found.keys_per_row is None else found.rows * found.keys_per_row,
    )
    if found.keys_per_row is None or found.keys_per_row > 0:
        rebuilt.add_many(keys)
        report.exact = rebuilt.to_bytes() == found.to_bytes()
    if found.keys_added is not None and found.keys_added != len(keys):
        report.notes.append(
            f"the filter's header counts {found.keys_added:,} keys added, the file has "
            f"{len(keys):,}"
        )
