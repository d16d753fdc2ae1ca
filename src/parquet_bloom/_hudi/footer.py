"""The Hudi entries of a base file's footer, read once through the library's IO layer.

Hudi keeps its record-key filter, the filter's type and the file's key range in the Parquet
footer's key-value metadata (docs/hudi.md#where-the-filter-lives). The footer is read with
:func:`parquet_bloom._io.source.read_footer` (one read of the file's tail, a second only when
the footer is longer; with Hudi's default filter the footer is ~430 KB, so a local file takes
two reads and a remote one, with its 1 MiB tail, one) and decoded whole: the key-value
metadata is among the fields the reader's fast decode skips.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from parquet_bloom import _format as fmt
from parquet_bloom._io.source import ByteSource, read_footer
from parquet_bloom.errors import BloomFilterError

__all__ = ["HUDI_KEYS", "HudiFooter", "read_hudi_metadata"]

# HoodieBloomFilterWriteSupport's keys: the filter (and its pre-Apache name), its type code and
# the file's key range.
HUDI_KEYS = (
    "org.apache.hudi.bloomfilter",
    "com.uber.hoodie.bloomfilter",
    "hoodie_bloom_filter_type_code",
    "hoodie_min_record_key",
    "hoodie_max_record_key",
)


class HudiFooter(NamedTuple):
    name: str  # the file, as messages name it
    metadata: dict[str, str]  # the Hudi entries present
    num_rows: int
    requests: int
    bytes_read: int


def read_hudi_metadata(
    source: Any,
    *,
    filesystem: Any | None = None,
    storage_options: Mapping[str, Any] | None = None,
    size: int | None = None,
    tail_size: int | None = None,
) -> HudiFooter:
    """The Hudi entries of ``source``'s footer (a path, URL, file object, or a path on
    ``filesystem``); ``size``, when a listing told it, saves the size lookup. The last entry
    of a key wins, as in parquet-java's map."""
    with ByteSource(
        source, filesystem=filesystem, storage_options=storage_options, size=size
    ) as reader:
        try:
            footer = read_footer(reader, tail_size)
            md = fmt.decode_file_metadata(footer.data, full=True)
        except BloomFilterError as e:
            raise e.located(source=reader.name) from e
        found: dict[str, str] = {}
        for kv in md.key_value_metadata or ():
            key, value = _text(kv.key), _text(kv.value)
            if key in HUDI_KEYS and value is not None:
                found[key] = value
        return HudiFooter(
            reader.name, found, int(md.num_rows or 0), reader.requests, reader.bytes_read
        )


def _text(value: str | bytes | None) -> str | None:
    """A Thrift string as text (the full decode may leave it as bytes): UTF-8, lenient as the
    reader's strings are."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
